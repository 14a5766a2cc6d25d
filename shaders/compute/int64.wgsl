// int64 helpers: an int64 element is vec2<u32>(low word, high word), two's complement.
// Comparisons are exact over the whole range. Conversions: int32 <-> int64 exact (int64 ->
// int32 keeps the low word, wrapping like NumPy); float32 -> int64 truncates toward zero and
// is exact over the whole int64 range (float32 values >= 2^24 are integers), saturating at
// +-(2^63 - 2^39), the largest float32 below 2^63; int64 -> float32 is correctly rounded in
// the int32 range and within one float32 step beyond it.

// the element type's name in template parameters (T=I64): kernels pass names, not WGSL types
alias I64 = vec2<u32>;

fn i64_eq(a: vec2<u32>, b: vec2<u32>) -> bool {
    return all(a == b);
}

fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y);
    let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}

fn i64_neg(v: vec2<u32>) -> vec2<u32> {
    let lo = ~v.x + 1u;
    return vec2<u32>(lo, ~v.y + select(0u, 1u, lo == 0u));
}

fn i32_to_i64(x: i32) -> vec2<u32> {
    return vec2<u32>(bitcast<u32>(x), select(0u, 0xffffffffu, x < 0));
}

fn i64_to_f32(v: vec2<u32>) -> f32 {
    let lo = bitcast<i32>(v.x);
    let fits = (v.y == 0u && lo >= 0) || (v.y == 0xffffffffu && lo < 0);
    if (fits) {
        return f32(lo);
    }
    return f32(bitcast<i32>(v.y)) * 4294967296.0 + f32(v.x);
}

fn f32_to_i64(x: f32) -> vec2<u32> {
    let m = min(trunc(abs(x)), bitcast<f32>(0x5effffffu));
    let hi = floor(m / 4294967296.0);
    let lo = m - hi * 4294967296.0;
    let r = vec2<u32>(u32(lo), u32(hi));
    return select(r, i64_neg(r), x < 0.0);
}

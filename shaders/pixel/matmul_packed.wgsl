// Batched MatMul on the packed layout: one output texel = 4 results along the output's
// blocked axis (a batch axis from rank 4 on, M at rank 3), read as whole texels of A.
// i[0] = (M, N, K)
// i[1] = A's texture rows per step of output axes 0..3 (0 where A broadcasts)
// i[2] = (A's rows per step of output axis 4 (m, or its block at rank 3))
// i[3] = B's rows per step of output axes 0..3 (0 where B broadcasts)
// i[4] = (B's rows per step of k (or of a block of 4 k in KBLOCK mode))
// A_SPLAT: A has 1 element on the output's blocked axis (component x repeats).
// B mode ${B_MODE}: 0 B's texel holds the same 4 batch entries as the output (vec4),
//   1 the same batch entry for all 4 (splat x), 2 B is blocked along K (texel = 4 k),
//   3 B is [K, N] blocked along N (texel (n / 4, k), component n % 4).

const A_SPLAT: bool = ${A_SPLAT};
const B_MODE: i32 = ${B_MODE};

@group(0) @binding(1) var A: texture_2d<f32>;
@group(0) @binding(2) var B: texture_2d<f32>;

fn a_at(x: u32, row: u32) -> vec4<f32> {
    let v = ld(A, x, row);
    if (A_SPLAT) {
        return v.xxxx;
    }
    return v;
}

// B[k, n] (one batch entry for all 4 components)
fn b_one(k: u32, n: u32, base: u32) -> f32 {
    let s = u32(U.i[4].x);
    if (B_MODE == 3) {
        return ld(B, n / 4u, k)[n % 4u];
    }
    return ld(B, n, base + k * s).x;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let b = texel_index(U.o, p);
    let K = u32(U.i[0].z);
    let n = p.x;
    let sa = vec4<u32>(U.i[1]);
    let sb = vec4<u32>(U.i[3]);
    let bi = vec4<u32>(b[0], b[1], b[2], b[3]);
    let row_a = dot(bi, sa) + b[4] * u32(U.i[2].x);
    let row_b = dot(bi, sb);
    let sk = u32(U.i[4].x);
    let klast = K - 1u;
    var acc = vec4<f32>(0.0);
    var k0 = 0u;
    // whole groups of 4 k, then the rest with clamped reads and zero weights
    for (; k0 + 4u <= K; k0 += 4u) {
        let a0 = a_at(k0, row_a);
        let a1 = a_at(k0 + 1u, row_a);
        let a2 = a_at(k0 + 2u, row_a);
        let a3 = a_at(k0 + 3u, row_a);
        if (B_MODE == 0) {
            let r = row_b + k0 * sk;
            acc += a0 * ld(B, n, r) + a1 * ld(B, n, r + sk) + a2 * ld(B, n, r + 2u * sk)
                 + a3 * ld(B, n, r + 3u * sk);
        } else if (B_MODE == 2) {
            let bv = ld(B, n, row_b + (k0 / 4u) * sk);
            acc += a0 * bv.x + a1 * bv.y + a2 * bv.z + a3 * bv.w;
        } else {
            acc += a0 * b_one(k0, n, row_b) + a1 * b_one(k0 + 1u, n, row_b)
                 + a2 * b_one(k0 + 2u, n, row_b) + a3 * b_one(k0 + 3u, n, row_b);
        }
    }
    for (; k0 < K; k0++) {
        let a = a_at(k0, row_a);
        if (B_MODE == 0) {
            acc += a * ld(B, n, row_b + k0 * sk);
        } else if (B_MODE == 2) {
            acc += a * ld(B, n, row_b + (k0 / 4u) * sk)[k0 % 4u];
        } else {
            acc += a * b_one(min(k0, klast), n, row_b);
        }
    }
    return select(vec4<f32>(0.0), acc, mask_at(U.o, p));
}

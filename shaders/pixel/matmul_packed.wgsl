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
// A fragment at column x computes the output columns n = x + j * Q for j < P (1, 2, 4 or 8),
// one colour target each (target 0 is the output; the others are copied into its columns
// j * Q.. after the pass), so every texel of A it loads serves P columns.
// i[5].x = Q
// The epilogue (gpu_common/epilogues.py): every result is scaled by f[0].x, the bias of its
// column added (HAS_BIAS: BIAS is an [N] texture) and ${ACT} applied (act4, parameters in f[1]).

//!include pixel/conv_out${P}.wgsl
//!include pixel/act4.wgsl

const A_SPLAT: bool = ${A_SPLAT};
const B_MODE: i32 = ${B_MODE};
const P: i32 = ${P};
const HAS_BIAS: bool = ${HAS_BIAS};

@group(0) @binding(1) var A: texture_2d<f32>;
@group(0) @binding(2) var B: texture_2d<f32>;
@group(0) @binding(3) var BIAS: texture_2d<f32>;

// the epilogue of output column n (its 4 results)
fn epilogue(c: vec4<f32>, n: u32) -> vec4<f32> {
    var v = c * U.f[0].x;
    if (HAS_BIAS) {
        v += vec4<f32>(ld(BIAS, n / 4u, 0u)[n % 4u]);
    }
    return act4(v, U.f[1]);
}

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

// the contribution of k0..k0+3 to output column n, A's 4 texels given
fn step4(a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>, k0: u32, n: u32,
         row_b: u32, sk: u32) -> vec4<f32> {
    if (B_MODE == 0) {
        let r = row_b + k0 * sk;
        return a0 * ld(B, n, r) + a1 * ld(B, n, r + sk) + a2 * ld(B, n, r + 2u * sk)
             + a3 * ld(B, n, r + 3u * sk);
    } else if (B_MODE == 2) {
        let bv = ld(B, n, row_b + (k0 / 4u) * sk);
        return a0 * bv.x + a1 * bv.y + a2 * bv.z + a3 * bv.w;
    }
    return a0 * b_one(k0, n, row_b) + a1 * b_one(k0 + 1u, n, row_b)
         + a2 * b_one(k0 + 2u, n, row_b) + a3 * b_one(k0 + 3u, n, row_b);
}

// the contribution of one k (the K % 4 tail) to output column n
fn step1(a: vec4<f32>, k0: u32, klast: u32, n: u32, row_b: u32, sk: u32) -> vec4<f32> {
    if (B_MODE == 0) {
        return a * ld(B, n, row_b + k0 * sk);
    } else if (B_MODE == 2) {
        return a * ld(B, n, row_b + (k0 / 4u) * sk)[k0 % 4u];
    }
    return a * b_one(min(k0, klast), n, row_b);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> Out {
    let p = vec2<u32>(pos.xy);
    let b = texel_index(U.o, p);
    let K = u32(U.i[0].z);
    let q = u32(U.i[5].x);
    let n0 = p.x;
    let sa = vec4<u32>(U.i[1]);
    let sb = vec4<u32>(U.i[3]);
    let bi = vec4<u32>(b[0], b[1], b[2], b[3]);
    let row_a = dot(bi, sa) + b[4] * u32(U.i[2].x);
    let row_b = dot(bi, sb);
    let sk = u32(U.i[4].x);
    let klast = K - 1u;
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);
    var c4 = vec4<f32>(0.0);
    var c5 = vec4<f32>(0.0);
    var c6 = vec4<f32>(0.0);
    var c7 = vec4<f32>(0.0);
    var k0 = 0u;
    // whole groups of 4 k, then the rest with clamped reads and zero weights
    for (; k0 + 4u <= K; k0 += 4u) {
        let a0 = a_at(k0, row_a);
        let a1 = a_at(k0 + 1u, row_a);
        let a2 = a_at(k0 + 2u, row_a);
        let a3 = a_at(k0 + 3u, row_a);
        c0 += step4(a0, a1, a2, a3, k0, n0, row_b, sk);
        if (P > 1) {
            c1 += step4(a0, a1, a2, a3, k0, n0 + q, row_b, sk);
        }
        if (P > 2) {
            c2 += step4(a0, a1, a2, a3, k0, n0 + 2u * q, row_b, sk);
            c3 += step4(a0, a1, a2, a3, k0, n0 + 3u * q, row_b, sk);
        }
        if (P > 4) {
            c4 += step4(a0, a1, a2, a3, k0, n0 + 4u * q, row_b, sk);
            c5 += step4(a0, a1, a2, a3, k0, n0 + 5u * q, row_b, sk);
            c6 += step4(a0, a1, a2, a3, k0, n0 + 6u * q, row_b, sk);
            c7 += step4(a0, a1, a2, a3, k0, n0 + 7u * q, row_b, sk);
        }
    }
    for (; k0 < K; k0++) {
        let a = a_at(k0, row_a);
        c0 += step1(a, k0, klast, n0, row_b, sk);
        if (P > 1) {
            c1 += step1(a, k0, klast, n0 + q, row_b, sk);
        }
        if (P > 2) {
            c2 += step1(a, k0, klast, n0 + 2u * q, row_b, sk);
            c3 += step1(a, k0, klast, n0 + 3u * q, row_b, sk);
        }
        if (P > 4) {
            c4 += step1(a, k0, klast, n0 + 4u * q, row_b, sk);
            c5 += step1(a, k0, klast, n0 + 5u * q, row_b, sk);
            c6 += step1(a, k0, klast, n0 + 6u * q, row_b, sk);
            c7 += step1(a, k0, klast, n0 + 7u * q, row_b, sk);
        }
    }
    c0 = epilogue(c0, n0);
    if (P > 1) {
        c1 = epilogue(c1, n0 + q);
    }
    if (P > 2) {
        c2 = epilogue(c2, n0 + 2u * q);
        c3 = epilogue(c3, n0 + 3u * q);
    }
    if (P > 4) {
        c4 = epilogue(c4, n0 + 4u * q);
        c5 = epilogue(c5, n0 + 5u * q);
        c6 = epilogue(c6, n0 + 6u * q);
        c7 = epilogue(c7, n0 + 7u * q);
    }
    // the texel's lanes past the blocked axis's end are zero (the same for every column)
    let keep = mask_at(U.o, p);
    let z = vec4<f32>(0.0);
    return outputs(array<vec4<f32>, 8>(select(z, c0, keep), select(z, c1, keep),
                   select(z, c2, keep), select(z, c3, keep), select(z, c4, keep),
                   select(z, c5, keep), select(z, c6, keep), select(z, c7, keep)));
}

// Y[M, N] = alpha * A' B' + beta * C, then the fused activation ${ACT} (act4) with f[7].
// One texel = Y[m, n0..n0+3] (rank-2 tensors block their last axis).
// i[0] = (M, N, K, transA)   i[1] = (transB, C access)   f[0] = (alpha, beta)
// C access: 0 none, 1 numpy broadcasting, 2 a vector over N (texel (nb, 0)), 3 C is [M, N].

//!include pixel/act4.wgsl

// transA, transB and the C access are compile-time constants (dynamic branches are slow).
const TRANS_A: bool = ${TRANS_A};
const TRANS_B: bool = ${TRANS_B};
const C_MODE: i32 = ${C_MODE};

@group(0) @binding(1) var A: texture_2d<f32>;
@group(0) @binding(2) var B: texture_2d<f32>;
@group(0) @binding(3) var C: texture_2d<f32>;

// A'[m, 4kb..4kb+3]
fn a_row(m: u32, kb: u32) -> vec4<f32> {
    if (!TRANS_A) {
        return ld(A, kb, m);
    }
    // A is [K, M]: gather A[k, m] from 4 rows; rows past K read as 0
    let K = u32(U.i[0].z);
    var r = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let k = kb * 4u + i;
        if (k < K) {
            r[i] = ld(A, m / 4u, k)[m % 4u];
        }
    }
    return r;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let M = u32(U.i[0].x);
    let N = u32(U.i[0].y);
    let K = u32(U.i[0].z);
    let nb = p.x;
    let m = p.y;
    let kbs = (K + 3u) / 4u;
    let n0 = nb * 4u;
    var acc = vec4<f32>(0.0);
    if (TRANS_B) {
        // B is [N, K]: rows n0..n0+3, one texel per 4 k
        let r0 = min(n0, N - 1u);
        let r1 = min(n0 + 1u, N - 1u);
        let r2 = min(n0 + 2u, N - 1u);
        let r3 = min(n0 + 3u, N - 1u);
        for (var kb = 0u; kb < kbs; kb++) {
            let a = a_row(m, kb);
            acc += vec4<f32>(dot(a, ld(B, kb, r0)), dot(a, ld(B, kb, r1)),
                             dot(a, ld(B, kb, r2)), dot(a, ld(B, kb, r3)));
        }
    } else {
        // B is [K, N]: texel (nb, k) = B[k, n0..n0+3]. Whole blocks of 4 k, then the last
        // K % 4 rows alone: a padded k of A is 0, and 0 times a clamped row's Inf is NaN
        let kfull = K / 4u;
        for (var kb = 0u; kb < kfull; kb++) {
            let a = a_row(m, kb);
            let k = kb * 4u;
            acc += a.x * ld(B, nb, k) + a.y * ld(B, nb, k + 1u)
                 + a.z * ld(B, nb, k + 2u) + a.w * ld(B, nb, k + 3u);
        }
        if (kfull < kbs) {
            let a = a_row(m, kfull);
            for (var i = 0u; i < K % 4u; i++) {
                acc += a[i] * ld(B, nb, kfull * 4u + i);
            }
        }
    }
    var y = U.f[0].x * acc;
    switch C_MODE {
        case 0: {}
        case 2: { y += U.f[0].y * ld(C, nb, 0u); }
        case 3: { y += U.f[0].y * ld(C, nb, m); }
        default: { y += U.f[0].y * load_bcast4(C, U.t[2], texel_index(U.o, p)); }
    }
    return select(vec4<f32>(0.0), act4(y, U.f[7]), mask_at(U.o, p));
}

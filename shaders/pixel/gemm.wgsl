// Y[M, N] = alpha * A' B' + beta * C, then the fused activation u_${ACT} with f[7].
// One texel = Y[m, n0..n0+3] (rank-2 tensors block their last axis).
// i[0] = (M, N, K, transA)   i[1] = (transB, has C)   f[0] = (alpha, beta)

@group(0) @binding(1) var A: texture_2d<f32>;
@group(0) @binding(2) var B: texture_2d<f32>;
@group(0) @binding(3) var C: texture_2d<f32>;

// A'[m, 4kb..4kb+3]
fn a_row(m: u32, kb: u32) -> vec4<f32> {
    if (U.i[0].w == 0) {
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
    if (U.i[1].x != 0) {
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
        // B is [K, N]: texel (nb, k) = B[k, n0..n0+3]; padded k of A are 0
        for (var kb = 0u; kb < kbs; kb++) {
            let a = a_row(m, kb);
            let k = kb * 4u;
            acc += a.x * ld(B, nb, k) + a.y * ld(B, nb, min(k + 1u, K - 1u))
                 + a.z * ld(B, nb, min(k + 2u, K - 1u)) + a.w * ld(B, nb, min(k + 3u, K - 1u));
        }
    }
    var y = U.f[0].x * acc;
    let b = texel_index(U.o, p);
    if (U.i[1].y != 0) {
        y += U.f[0].y * load_bcast4(C, U.t[2], b);
    }
    return keep_valid(U.o, b, u_${ACT}(y, U.f[7]));
}

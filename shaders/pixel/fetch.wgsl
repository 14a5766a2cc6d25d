// How elementwise.wgsl and where.wgsl read an input texel for the output texel at pixel p
// (modes chosen by kernels_elementwise.access_mode):
//   0 same layout as the output: the texel at the same pixel
//   1 numpy broadcasting: one gather per component (index arithmetic; the slow path)
//   2 per-channel vector: a rank-1 [C] texture, texel (channel block, 0)
//   3 per-sample-and-channel: same leading dims, 1 after the channel axis: texel
//     (0, row / rows per channel step)
//   4 vector over the last axis (x) while the output blocks another axis, rank <= 2 input
//     (4 elements per texel): element x of texel (x / 4, 0), repeated in all components
//   5 the same for a rank >= 3 input [1, .., 1, D] (1 element per texel): texel (x, 0)
//   6 one element (a scalar, or all dims 1): component x of texel (0, 0), in all four

fn fetch(tex: texture_2d<f32>, mode: i32, k: u32, p: vec2<u32>) -> vec4<f32> {
    switch mode {
        case 0: {
            return ld(tex, p.x, p.y);
        }
        case 2: {
            return ld(tex, block_of(U.o, p), 0u);
        }
        case 3: {
            return ld(tex, 0u, p.y / U.o.r1.z);
        }
        case 4: {
            return vec4<f32>(ld(tex, p.x / 4u, 0u)[p.x % 4u]);
        }
        case 5: {
            return ld(tex, p.x, 0u).xxxx;
        }
        case 6: {
            return ld(tex, 0u, 0u).xxxx;
        }
        default: {
            return load_bcast4(tex, U.t[k], texel_index(U.o, p));
        }
    }
}

// Broadcasting elementwise ops: out = op ${ACT} (act4) of the fold of b_${BIN} over the
// inputs, times f[0].x; the op's parameters in f[1].
// Specialised per input count N = ${N} and per-input access M0..M7 (constants, so the
// compiler drops the unused paths: a dynamic branch to the slow path costs 5x here):
//   0 same layout as the output: the texel at the same pixel
//   1 numpy broadcasting: one gather per component (index arithmetic; the slow path)
//   2 per-channel vector: a rank-1 [C] texture, texel (channel block, 0)
//   3 per-sample-and-channel: same leading dims, 1 after the channel axis: texel
//     (0, row / rows per channel step)
//   4 vector over the last axis (x) while the output blocks another axis, rank <= 2 input
//     (4 elements per texel): element x of texel (x / 4, 0), repeated in all components
//   5 the same for a rank >= 3 input [1, .., 1, D] (1 element per texel): texel (x, 0)
//   6 one element (a scalar, or all dims 1): component x of texel (0, 0), in all four

//!include pixel/act4.wgsl

const N: i32 = ${N};
const M0: i32 = ${M0};
const M1: i32 = ${M1};
const M2: i32 = ${M2};
const M3: i32 = ${M3};
const M4: i32 = ${M4};
const M5: i32 = ${M5};
const M6: i32 = ${M6};
const M7: i32 = ${M7};

@group(0) @binding(1) var t0: texture_2d<f32>;
@group(0) @binding(2) var t1: texture_2d<f32>;
@group(0) @binding(3) var t2: texture_2d<f32>;
@group(0) @binding(4) var t3: texture_2d<f32>;
@group(0) @binding(5) var t4: texture_2d<f32>;
@group(0) @binding(6) var t5: texture_2d<f32>;
@group(0) @binding(7) var t6: texture_2d<f32>;
@group(0) @binding(8) var t7: texture_2d<f32>;

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

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    var v = fetch(t0, M0, 0u, p);
    if (N > 1) { v = b_${BIN}(v, fetch(t1, M1, 1u, p)); }
    if (N > 2) { v = b_${BIN}(v, fetch(t2, M2, 2u, p)); }
    if (N > 3) { v = b_${BIN}(v, fetch(t3, M3, 3u, p)); }
    if (N > 4) { v = b_${BIN}(v, fetch(t4, M4, 4u, p)); }
    if (N > 5) { v = b_${BIN}(v, fetch(t5, M5, 5u, p)); }
    if (N > 6) { v = b_${BIN}(v, fetch(t6, M6, 6u, p)); }
    if (N > 7) { v = b_${BIN}(v, fetch(t7, M7, 7u, p)); }
    v = act4(v * U.f[0].x, U.f[1]);
    if (${PADDED}) {
        v = select(vec4<f32>(0.0), v, mask_at(U.o, p));
    }
    return v;
}

// Broadcasting elementwise ops: out = op ${ACT} (act4) of the fold of b_${BIN} over the
// inputs, times f[0].x; the op's parameters in f[1].
// Specialised per input count N = ${N} and per-input access M0..M7 (pixel/fetch.wgsl;
// constants, so the compiler drops the unused paths: a dynamic branch to the slow path
// costs 5x here).

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

//!include pixel/fetch.wgsl

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

// Where: out = C != 0 ? X : Y, all three broadcast to the output, each read a texel at a
// time in its access mode M0..M2 (pixel/fetch.wgsl): one numpy-broadcast gather per value
// of each input made GPT's causal mask over 4 heads of 64 x 64 take ~6 ms on lavapipe.

const M0: i32 = ${M0};
const M1: i32 = ${M1};
const M2: i32 = ${M2};

@group(0) @binding(1) var C: texture_2d<f32>;
@group(0) @binding(2) var X: texture_2d<f32>;
@group(0) @binding(3) var Y: texture_2d<f32>;

//!include pixel/fetch.wgsl

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let v = select(fetch(Y, M2, 2u, p), fetch(X, M1, 1u, p), fetch(C, M0, 0u, p) != vec4<f32>(0.0));
    if (${PADDED}) {
        return select(vec4<f32>(0.0), v, mask_at(U.o, p));
    }
    return v;
}

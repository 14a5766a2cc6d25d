// Fragment outputs of a pass writing 8 colour targets (conv_tap.wgsl): pixel j of the
// fragment goes to target j.

struct Out {
    @location(0) c0: vec4<f32>,
    @location(1) c1: vec4<f32>,
    @location(2) c2: vec4<f32>,
    @location(3) c3: vec4<f32>,
    @location(4) c4: vec4<f32>,
    @location(5) c5: vec4<f32>,
    @location(6) c6: vec4<f32>,
    @location(7) c7: vec4<f32>,
}

fn outputs(c: array<vec4<f32>, 8>) -> Out {
    return Out(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
}

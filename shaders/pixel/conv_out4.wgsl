// Fragment outputs of a pass writing 4 colour targets (conv_tap.wgsl): pixel j of the
// fragment goes to target j.

struct Out {
    @location(0) c0: vec4<f32>,
    @location(1) c1: vec4<f32>,
    @location(2) c2: vec4<f32>,
    @location(3) c3: vec4<f32>,
}

fn outputs(c0: vec4<f32>, c1: vec4<f32>, c2: vec4<f32>, c3: vec4<f32>) -> Out {
    return Out(c0, c1, c2, c3);
}

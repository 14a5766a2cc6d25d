// Fragment outputs of a pass writing 1 colour target (conv_tap.wgsl): pixel j of the
// fragment goes to target j; the other pixels are not written.

struct Out {
    @location(0) c0: vec4<f32>,
}

fn outputs(c0: vec4<f32>, c1: vec4<f32>, c2: vec4<f32>, c3: vec4<f32>) -> Out {
    return Out(c0);
}

// act4(v, p): the unary op ${ACT} of shaders/common/activations.wgsl on each component of
// v, its parameters A, B, C in p.xyz (the elementwise pass's op, a fused activation).

//!include common/activations.wgsl

fn act4(v: vec4<f32>, p: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(op_${ACT}(v.x, p.x, p.y, p.z), op_${ACT}(v.y, p.x, p.y, p.z),
                     op_${ACT}(v.z, p.x, p.y, p.z), op_${ACT}(v.w, p.x, p.y, p.z));
}

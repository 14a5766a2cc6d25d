// binary_bcast_vec4.wgsl: operand b is constant along the innermost dim
@group(0) @binding(2) var<storage, read> xb: array<f32>;
fn load_b(base: i32, i2: i32) -> vec4<f32> { return vec4<f32>(xb[base]); }

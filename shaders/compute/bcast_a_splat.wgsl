// binary_bcast_vec4.wgsl: operand a is constant along the innermost dim
@group(0) @binding(1) var<storage, read> xa: array<f32>;
fn load_a(base: i32, i2: i32) -> vec4<f32> { return vec4<f32>(xa[base]); }

// binary_bcast_vec4.wgsl: operand b steps along the innermost dim (base and i2 are multiples of 4)
@group(0) @binding(2) var<storage, read> xb: array<vec4<f32>>;
fn load_b(base: i32, i2: i32) -> vec4<f32> { return xb[(base + i2) / 4]; }

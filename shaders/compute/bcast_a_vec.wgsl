// binary_bcast_vec4.wgsl: operand a steps along the innermost dim (base and i2 are multiples of 4)
@group(0) @binding(1) var<storage, read> xa: array<vec4<f32>>;
fn load_a(base: i32, i2: i32) -> vec4<f32> { return xa[(base + i2) / 4]; }

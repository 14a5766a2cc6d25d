// y = op_${OP}(x) elementwise (shaders/common/activations.wgsl, or a cast of
// compute/cast.wgsl); A, B, C are the op's float attributes.
struct Params { n: i32, a: f32, b: f32, c: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<${T}>;
@group(0) @binding(2) var<storage, read_write> y: array<${U}>;

//!include common/activations.wgsl
//!include compute/cast.wgsl

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    y[i] = op_${OP}(x[i], p.a, p.b, p.c);
}

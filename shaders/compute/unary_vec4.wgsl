// y = op_${OP}(x) on f32 (shaders/common/activations.wgsl), four elements per invocation (n
// is a multiple of 4): CPU adapters then run vector loads and stores, and index arithmetic
// is paid once per four elements.
struct Params { n: i32, a: f32, b: f32, c: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<f32>>;

//!include common/activations.wgsl

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n / 4) { return; }
    let v = x[i];
    y[i] = vec4<f32>(op_${OP}(v.x, p.a, p.b, p.c), op_${OP}(v.y, p.a, p.b, p.c),
                     op_${OP}(v.z, p.a, p.b, p.c), op_${OP}(v.w, p.a, p.b, p.c));
}

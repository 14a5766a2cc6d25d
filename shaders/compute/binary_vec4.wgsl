// y = op_${OP}(a, b) for same-shape f32 operands, four elements per invocation (n % 4 == 0):
// the ops of binary_arith.wgsl, whose operators apply to vec4<f32> as written.
struct Params { n: i32, pad0: i32, pad1: i32, pad2: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> xa: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> xb: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;

alias T = vec4<f32>;
//!include common/math.wgsl
//!include compute/binary_arith.wgsl
fn op_Div(a: T, b: T) -> T { return div_f4(a, b); }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n / 4) { return; }
    let a = xa[i];
    let b = xb[i];
    y[i] = op_${OP}(a, b);
}

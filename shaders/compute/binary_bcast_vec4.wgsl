// binary_bcast.wgsl four f32 elements at a time along the innermost collapsed dim (n2 % 4 ==
// 0): each operand either steps along it (A_LOAD/B_LOAD "vec": one vec4 load, its other
// strides are multiples of n2) or is constant along it ("splat": one scalar, e.g. a bias
// broadcast over a row, or a scalar). The ops of binary_arith.wgsl apply to vec4 as written.
struct Params {
    n: i32, n1: i32, n2: i32, pad0: i32,
    sa: vec4<i32>,
    sb: vec4<i32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;

//!include compute/bcast_a_${A_LOAD}.wgsl
//!include compute/bcast_b_${B_LOAD}.wgsl

alias T = vec4<f32>;
//!include common/math.wgsl
//!include compute/binary_arith.wgsl
fn op_Div(a: T, b: T) -> T { return div_f4(a, b); }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let q = i32(g.x + g.y * nw.x * 64u);
    if (q >= p.n / 4) { return; }
    let n2v = p.n2 / 4;
    let i2 = (q % n2v) * 4;
    let t = q / n2v;
    let i1 = t % p.n1;
    let i0 = t / p.n1;
    let va = load_a(i0 * p.sa.x + i1 * p.sa.y, i2);
    let vb = load_b(i0 * p.sb.x + i1 * p.sb.y, i2);
    y[q] = op_${OP}(va, vb);
}

// y = op_${OP}(a, b) with broadcasting, the shape collapsed on the host to at most three
// dims (n0, n1, n2) (merging dims along which both operands step contiguously or not at all):
// two divisions per element instead of binary.wgsl's loop over up to eight dims.
struct Params {
    n: i32, n1: i32, n2: i32, pad0: i32,
    sa: vec4<i32>,
    sb: vec4<i32>,
}

alias T = ${T};
alias U = ${U};

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<T>;
@group(0) @binding(2) var<storage, read> b: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<U>;

//!include compute/binary_ops_${T}.wgsl

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let i2 = i % p.n2;
    let t = i / p.n2;
    let i1 = t % p.n1;
    let i0 = t / p.n1;
    let ia = i0 * p.sa.x + i1 * p.sa.y + i2 * p.sa.z;
    let ib = i0 * p.sb.x + i1 * p.sb.y + i2 * p.sb.z;
    y[i] = op_${OP}(a[ia], b[ib]);
}

// y = op_${OP}(a, b) with NumPy broadcasting: per-dimension input strides are 0 where
// broadcast. The ops are functions of binary_ops_${T}.wgsl, one file per element type
// (f32, i32, u32 (also bool), I64); U is the result type (u32 for comparisons).
struct Params {
    n: i32, rank: i32, same: i32, pad0: i32,
    shape: array<vec4<i32>, 2>,
    sa: array<vec4<i32>, 2>,
    sb: array<vec4<i32>, 2>,
}

alias T = ${T};
alias U = ${U};

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<T>;
@group(0) @binding(2) var<storage, read> b: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<U>;

//!include compute/binary_ops_${T}.wgsl

fn op(a: T, b: T) -> U {
    return op_${OP}(a, b);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    var ia = i;
    var ib = i;
    if (p.same == 0) {
        ia = 0;
        ib = 0;
        var rem = i;
        for (var d = p.rank - 1; d >= 0; d--) {
            let size = p.shape[d / 4][d % 4];
            let c = rem % size;
            rem = rem / size;
            ia += c * p.sa[d / 4][d % 4];
            ib += c * p.sb[d / 4][d % 4];
        }
    }
    y[i] = op(a[ia], b[ib]);
}

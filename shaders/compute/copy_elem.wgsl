// copy.wgsl's strided copy, y[out_base + idx . so] = x[in_base + (idx mod m) . si], with one
// element per invocation: for GPUs, where neighbouring invocations must touch neighbouring
// words for the memory system to coalesce them. copy.wgsl's runs of 64 elements per
// invocation (which spare CPU adapters the integer divisions) put them 64 elements apart.
//!include compute/copy_params.wgsl
//!include compute/copy_${T}.wgsl

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let t = i32(g.x + g.y * nw.x * 64u);
    if (t >= p.n) { return; }
    var ii = p.in_base;
    var oo = p.out_base;
    var rem = t;
    for (var d = p.rank - 1; d >= 0; d--) {
        let size = p.shape[d / 4][d % 4];
        let c = rem % size;
        rem = rem / size;
        ii += (c % p.m[d / 4][d % 4]) * p.si[d / 4][d % 4];
        oo += c * p.so[d / 4][d % 4];
    }
    for (var w = 0; w < ${W}; w++) {
        y[oo * ${W} + w] = x[ii * ${W} + w];
    }
}

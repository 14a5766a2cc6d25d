// Strided copy: for every index of an iteration shape, y[out_base + idx . so] =
// x[in_base + (idx mod m) . si], moving ${W} 32-bit words per element. Transpose, Slice,
// Expand, Tile, Concat, Split and DepthToSpace are all this one shader. Each invocation
// copies a run of up to 64 elements along the innermost dim, so the integer divisions that
// decode the outer index (slow on CPU adapters, which cannot vectorise them) are paid once
// per run rather than once per element.
//!include compute/copy_params.wgsl
// x and y of single words (T=word) or of groups of 4 words where runs, strides and bases
// are multiples of 4 (T=quad: a quarter of the loads and stores; strided_copy picks it)
//!include compute/copy_${T}.wgsl

const RUN: i32 = 64;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let t = i32(g.x + g.y * nw.x * 64u);
    if (t >= p.n) { return; }
    let row = t / p.chunks;
    let first = (t % p.chunks) * RUN;
    var ii = p.in_base;
    var oo = p.out_base;
    var rem = row;
    for (var d = p.rank - 2; d >= 0; d--) {
        let size = p.shape[d / 4][d % 4];
        let c = rem % size;
        rem = rem / size;
        ii += (c % p.m[d / 4][d % 4]) * p.si[d / 4][d % 4];
        oo += c * p.so[d / 4][d % 4];
    }
    let last = p.rank - 1;
    let si = p.si[last / 4][last % 4];
    let so = p.so[last / 4][last % 4];
    let ml = p.m[last / 4][last % 4];
    let end = min(first + RUN, p.inner);
    let wraps = ml != p.inner;
    for (var j = first; j < end; j++) {
        var jj = j;
        if (wraps) { jj = j % ml; }
        let src = (ii + jj * si) * ${W};
        let dst = (oo + j * so) * ${W};
        for (var w = 0; w < ${W}; w++) {
            y[dst + w] = x[src + w];
        }
    }
}

// y = cond ? x : z with NumPy broadcasting of all three inputs; x and z have ${W} 32-bit
// words per element (64-bit values are moved, never computed on).
struct Params {
    n: i32, rank: i32, pad0: i32, pad1: i32,
    shape: array<vec4<i32>, 2>,
    sc: array<vec4<i32>, 2>,
    sx: array<vec4<i32>, 2>,
    sz: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> cond: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;
@group(0) @binding(3) var<storage, read> z: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    var ic = 0;
    var ix = 0;
    var iz = 0;
    var rem = i;
    for (var d = p.rank - 1; d >= 0; d--) {
        let size = p.shape[d / 4][d % 4];
        let c = rem % size;
        rem = rem / size;
        ic += c * p.sc[d / 4][d % 4];
        ix += c * p.sx[d / 4][d % 4];
        iz += c * p.sz[d / 4][d % 4];
    }
    let pick = cond[ic] != 0u;
    for (var w = 0; w < ${W}; w++) {
        y[i * ${W} + w] = select(z[iz * ${W} + w], x[ix * ${W} + w], pick);
    }
}

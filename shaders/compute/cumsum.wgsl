// CumSum along one axis: one invocation per line (outer, inner) adds up its L elements in
// order (reverse: from the end; exclusive: each output leaves out its own element).
struct Params { n: i32, L: i32, inner: i32, reverse: i32, exclusive: i32, p0: i32, p1: i32,
                p2: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<${T}>;
@group(0) @binding(2) var<storage, read_write> y: array<${T}>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let t = i32(g.x + g.y * nw.x * 64u);
    if (t >= p.n) { return; }
    let base = (t / p.inner) * p.L * p.inner + t % p.inner;
    var acc = ${T}(0);
    for (var j = 0; j < p.L; j++) {
        let jj = select(j, p.L - 1 - j, p.reverse != 0);
        let at = base + jj * p.inner;
        let v = x[at];
        if (p.exclusive != 0) {
            y[at] = acc;
            acc += v;
        } else {
            acc += v;
            y[at] = acc;
        }
    }
}

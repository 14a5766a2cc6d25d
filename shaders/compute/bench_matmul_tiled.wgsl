// Reference for the performance notes: classic workgroup-memory tiling (16x16 tiles, one
// output per invocation, two barriers per K step). Fast on discrete GPUs, slow on lavapipe.
struct Params { M: u32, N: u32, K: u32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

var<workgroup> ta: array<array<f32, 16>, 16>;
var<workgroup> tb: array<array<f32, 16>, 16>;

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
    let row = g.y;
    let col = g.x;
    var acc = 0.0;
    for (var t = 0u; t < p.K; t += 16u) {
        ta[l.y][l.x] = select(0.0, a[row * p.K + t + l.x], row < p.M && t + l.x < p.K);
        tb[l.y][l.x] = select(0.0, b[(t + l.y) * p.N + col], col < p.N && t + l.y < p.K);
        workgroupBarrier();
        for (var k = 0u; k < 16u; k++) {
            acc += ta[l.y][k] * tb[k][l.x];
        }
        workgroupBarrier();
    }
    if (row < p.M && col < p.N) {
        c[row * p.N + col] = acc;
    }
}

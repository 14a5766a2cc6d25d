// Trilu: keep element (.., r, c) of the last two axes where c - r >= k (upper) or
// c - r <= k (lower), else 0. Moves `words` 32-bit words per element.
struct Params { n: i32, rows: i32, cols: i32, k: i32, upper: i32, words: i32, p0: i32, p1: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let c = i % p.cols;
    let r = (i / p.cols) % p.rows;
    let keep = select(c - r <= p.k, c - r >= p.k, p.upper != 0);
    for (var w = 0; w < p.words; w++) {
        y[i * p.words + w] = select(0u, x[i * p.words + w], keep);
    }
}

// y[i] = value (one or two 32-bit words per element).
struct Params { n: i32, words: i32, v0: u32, v1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    if (p.words == 2) {
        y[2 * i] = p.v0;
        y[2 * i + 1] = p.v1;
    } else {
        y[i] = p.v0;
    }
}

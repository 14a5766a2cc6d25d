// Nearest Resize of the two innermost dims by source-index tables the host computes, as the
// CPU backend and the ONNX reference do (t[oh] for output row oh, t[OH + ow] for output
// column ow): a coordinate exactly on a rounding boundary (x.5, or an integer for floor and
// ceil) must not move with the GPU's division, which Vulkan lets be 2.5 ulp off.
struct Params { n: i32, H: i32, W: i32, OH: i32, OW: i32, pad0: i32, pad1: i32, pad2: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> t: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let ow = i % p.OW;
    let oh = (i / p.OW) % p.OH;
    let plane = i / (p.OW * p.OH);
    y[i] = x[plane * p.H * p.W + t[oh] * p.W + t[p.OH + ow]];
}

// Reference for the performance notes: the simplest fast matmul for CPU adapters. C = A @ B,
// all row-major, M, N, K multiples of 4; 4x4 outputs per invocation, vec4 loads, no barriers.
struct Params { M: u32, N: u32, K: u32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<vec4<f32>>;

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let col = g.x;          // vec4 column of C
    let row = g.y * 4u;
    if (col * 4u >= p.N || row >= p.M) { return; }
    let nv = p.N / 4u;
    let kv = p.K / 4u;
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);
    for (var k = 0u; k < kv; k++) {
        let a0 = a[(row + 0u) * kv + k];
        let a1 = a[(row + 1u) * kv + k];
        let a2 = a[(row + 2u) * kv + k];
        let a3 = a[(row + 3u) * kv + k];
        let b0 = b[(4u * k + 0u) * nv + col];
        let b1 = b[(4u * k + 1u) * nv + col];
        let b2 = b[(4u * k + 2u) * nv + col];
        let b3 = b[(4u * k + 3u) * nv + col];
        c0 += a0.x * b0 + a0.y * b1 + a0.z * b2 + a0.w * b3;
        c1 += a1.x * b0 + a1.y * b1 + a1.z * b2 + a1.w * b3;
        c2 += a2.x * b0 + a2.y * b1 + a2.z * b2 + a2.w * b3;
        c3 += a3.x * b0 + a3.y * b1 + a3.z * b2 + a3.w * b3;
    }
    c[(row + 0u) * nv + col] = c0;
    c[(row + 1u) * nv + col] = c1;
    c[(row + 2u) * nv + col] = c2;
    c[(row + 3u) * nv + col] = c3;
}

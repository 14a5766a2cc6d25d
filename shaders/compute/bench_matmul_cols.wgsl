// Reference for the performance notes: one output column x 8 rows per invocation; B read as
// scalars that are contiguous across neighbouring invocations (CPU adapters vectorise across
// invocations, so these become plain vector loads), A as broadcast vec4s along K.
struct Params { M: u32, N: u32, K: u32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let col = g.x;
    let row = g.y * 8u;
    if (col >= p.N || row >= p.M) { return; }
    let kv = p.K / 4u;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    for (var k = 0u; k < kv; k++) {
        let bk = vec4<f32>(b[(4u * k) * p.N + col], b[(4u * k + 1u) * p.N + col],
                           b[(4u * k + 2u) * p.N + col], b[(4u * k + 3u) * p.N + col]);
        acc0.x += dot(a[(row + 0u) * kv + k], bk);
        acc0.y += dot(a[(row + 1u) * kv + k], bk);
        acc0.z += dot(a[(row + 2u) * kv + k], bk);
        acc0.w += dot(a[(row + 3u) * kv + k], bk);
        acc1.x += dot(a[(row + 4u) * kv + k], bk);
        acc1.y += dot(a[(row + 5u) * kv + k], bk);
        acc1.z += dot(a[(row + 6u) * kv + k], bk);
        acc1.w += dot(a[(row + 7u) * kv + k], bk);
    }
    for (var i = 0u; i < 4u; i++) {
        c[(row + i) * p.N + col] = acc0[i];
        c[(row + 4u + i) * p.N + col] = acc1[i];
    }
}

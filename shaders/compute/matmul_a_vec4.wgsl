// matmul.wgsl's A operand when it is contiguous along K and 16-byte aligned (A_LOAD=vec4):
// four elements along K in one load. Indices are never negative: the unsigned division by
// 4 becomes a shift.
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;

fn a_at(i: i32) -> f32 { return a[u32(i) / 4u][u32(i) % 4u]; }

// A(m, k..k+3); s = (sam, sak, sbk, sbn), nmax = N - 1
fn load_a4(base: i32, m: i32, k: i32, s: vec4<i32>, nmax: i32) -> vec4<f32> {
    return a[u32(base + m * s.x + k) / 4u];
}

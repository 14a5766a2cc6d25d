// matmul.wgsl's A operand with any strides (A_LOAD=scalar): four scalar loads along K.
@group(0) @binding(1) var<storage, read> a: array<f32>;

fn a_at(i: i32) -> f32 { return a[i]; }

// A(m, k..k+3); s = (sam, sak, sbk, sbn), nmax = N - 1
fn load_a4(base: i32, m: i32, k: i32, s: vec4<i32>, nmax: i32) -> vec4<f32> {
    let i = base + m * s.x + k * s.y;
    return vec4<f32>(a_at(i), a_at(i + s.y), a_at(i + 2 * s.y), a_at(i + 3 * s.y));
}

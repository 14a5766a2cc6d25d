// The dot-product form of matmul.wgsl's inner step (B contiguous along K): the tile holds
// the columns B(k..k+3, n0..n3), and a row of A meets each column in a dot product.
fn b_tile(base: i32, k: i32, n: vec4<i32>, s: vec4<i32>, nmax: i32) -> mat4x4<f32> {
    return mat4x4<f32>(load_b4(base, k, n.x, s, nmax), load_b4(base, k, n.y, s, nmax),
                       load_b4(base, k, n.z, s, nmax), load_b4(base, k, n.w, s, nmax));
}

// A(m, k..k+3) times the tile: the row's contribution to C(m, n0..n3)
fn mac(a: vec4<f32>, t: mat4x4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(a, t[0]), dot(a, t[1]), dot(a, t[2]), dot(a, t[3]));
}

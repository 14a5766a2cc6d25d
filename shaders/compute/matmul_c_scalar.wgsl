// matmul.wgsl's output with any row stride or offset (C_STORE=scalar): one store per element,
// the columns past N skipped.
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// C(row, n0..n0+3) where row is the element offset of the row
fn store4(row: i32, n0: i32, v: vec4<f32>) {
    for (var j = 0; j < 4; j++) {
        if (n0 + j >= p.N) { break; }
        y[row + n0 + j] = v[j];
    }
}

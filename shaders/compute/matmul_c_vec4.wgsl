// matmul.wgsl's output when N, the row stride and the offsets are multiples of 4
// (C_STORE=vec4): a row's 4 results in one store. With few K steps (a pointwise convolution
// over a few channels) the stores weigh as much as the loads; on CPU adapters every store is
// one per invocation, whatever its width.
@group(0) @binding(4) var<storage, read_write> y: array<vec4<f32>>;

// C(row, n0..n0+3) where row is the element offset of the row; n0 + 3 < N always holds here
fn store4(row: i32, n0: i32, v: vec4<f32>) {
    y[u32(row + n0) / 4u] = v;
}

// Helpers of the row convolutions (conv_rows.wgsl, conv_depthwise.wgsl), which bind the
// input as ``x: array<f32>`` before including this.

//!include common/activations.wgsl

// the fused activation (shaders/common/activations.wgsl; op_Identity when there is none)
fn act(x: f32, A: f32, B: f32) -> f32 {
    return op_${act}(x, A, B, 0.0);
}

// x[row + iw], 0 in the padding; wm = W - 1
fn at(row: i32, iw: i32, wm: i32) -> f32 {
    return select(0.0, x[row + clamp(iw, 0, wm)], iw >= 0 && iw <= wm);
}

// The output of each op of softmax.wgsl and softmax_rows.wgsl for element v (index j) of a
// line whose maximum is top (at index `at`), sum of exp(v - top) sum and its log lsum.

fn out_Softmax(v: f32, j: i32, top: f32, at: i32, sum: f32, lsum: f32) -> f32 {
    return exp(v - top) / sum;
}

fn out_LogSoftmax(v: f32, j: i32, top: f32, at: i32, sum: f32, lsum: f32) -> f32 {
    return v - top - lsum;
}

// whether the line's first NaN is looked for (Hardmax only: the others give NaN anyway)
fn first_nan_Softmax() -> bool { return false; }
fn first_nan_LogSoftmax() -> bool { return false; }
fn first_nan_Hardmax() -> bool { return true; }

// 1 at the first maximum, 0 elsewhere
fn out_Hardmax(v: f32, j: i32, top: f32, at: i32, sum: f32, lsum: f32) -> f32 {
    return select(0.0, 1.0, j == at);
}

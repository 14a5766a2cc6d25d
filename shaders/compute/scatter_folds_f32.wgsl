// How ScatterND folds an update u into the value a so far, one function fold_<reduction>
// per value of the `reduction` attribute; scatter_nd_fold.wgsl includes the file of its
// element type. Max and min keep a NaN from either side, as np.maximum.at does.
//!include common/math.wgsl

fn fold_add(a: f32, u: f32) -> f32 { return a + u; }
fn fold_mul(a: f32, u: f32) -> f32 { return a * u; }
fn fold_max(a: f32, u: f32) -> f32 { return max_f(a, u); }
fn fold_min(a: f32, u: f32) -> f32 { return min_f(a, u); }

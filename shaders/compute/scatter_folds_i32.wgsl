// ScatterND's folds of an update u into the value a on int32 (see scatter_folds_f32.wgsl);
// integers have no NaN, so bare max/min are exact.
fn fold_add(a: i32, u: i32) -> i32 { return a + u; }
fn fold_mul(a: i32, u: i32) -> i32 { return a * u; }
fn fold_max(a: i32, u: i32) -> i32 { return max(a, u); }
fn fold_min(a: i32, u: i32) -> i32 { return min(a, u); }

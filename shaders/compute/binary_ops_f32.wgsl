// Binary ops on f32 operands (binary.wgsl includes binary_ops_<T>.wgsl). Max and Min keep
// a NaN like np.maximum/np.minimum (max_f/min_f); Pow follows std::pow for the special
// cases (pow_f). Fmod is Mod with fmod=1, C's fmod (fmod_f: WGSL's `%` is a - b * trunc(a /
// b), inexact for large quotients); Mod with fmod=0 is undefined for floats and runs on the
// CPU.
//!include common/math.wgsl
//!include compute/binary_arith.wgsl
//!include compute/binary_compare.wgsl

fn op_Div(a: f32, b: f32) -> f32 { return div_f(a, b); }
fn op_Pow(a: f32, b: f32) -> f32 { return pow_f(a, b); }
fn op_PRelu(a: f32, b: f32) -> f32 { return select(a * b, a, a >= 0.0); }
fn op_Max(a: f32, b: f32) -> f32 { return max_f(a, b); }
fn op_Min(a: f32, b: f32) -> f32 { return min_f(a, b); }
fn op_Fmod(a: f32, b: f32) -> f32 { return fmod_f(a, b); }

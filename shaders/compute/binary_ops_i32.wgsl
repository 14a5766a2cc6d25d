// Binary ops on i32 operands (binary.wgsl includes binary_ops_<T>.wgsl).
//!include compute/binary_arith.wgsl
//!include compute/binary_compare.wgsl
//!include compute/binary_int.wgsl

//!include common/int_math.wgsl

// Fmod is Mod with fmod=1: the remainder takes the sign of the dividend (C's %)
fn op_Fmod(a: i32, b: i32) -> i32 { return rem_i32(a, b); }
// Mod with fmod=0: the remainder takes the sign of the divisor (Python's %, np.mod)
fn op_Mod(a: i32, b: i32) -> i32 {
    let r = rem_i32(a, b);
    return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}

// Comparisons of int64 operands (I64 = vec2<u32>, compute/int64.wgsl), exact over the whole
// range; binary.wgsl includes binary_ops_<T>.wgsl.
//!include compute/int64.wgsl

fn op_Equal(a: I64, b: I64) -> u32 { return u32(i64_eq(a, b)); }
fn op_Greater(a: I64, b: I64) -> u32 { return u32(i64_lt(b, a)); }
fn op_Less(a: I64, b: I64) -> u32 { return u32(i64_lt(a, b)); }
fn op_GreaterOrEqual(a: I64, b: I64) -> u32 { return u32(!i64_lt(a, b)); }
fn op_LessOrEqual(a: I64, b: I64) -> u32 { return u32(!i64_lt(b, a)); }

// Comparisons of scalar operands (alias T: f32, i32 or u32; bool is u32): 1u for true, 0u
// for false. A NaN compares false with everything, as in NumPy. int64 operands use
// binary_ops_I64.wgsl instead.
fn op_Equal(a: T, b: T) -> u32 { return u32(a == b); }
fn op_Greater(a: T, b: T) -> u32 { return u32(a > b); }
fn op_Less(a: T, b: T) -> u32 { return u32(a < b); }
fn op_GreaterOrEqual(a: T, b: T) -> u32 { return u32(a >= b); }
fn op_LessOrEqual(a: T, b: T) -> u32 { return u32(a <= b); }

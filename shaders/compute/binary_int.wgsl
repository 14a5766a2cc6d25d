// Binary ops of both integer types (alias T: i32 or u32). Bare max/min are exact on integers
// (no NaN to keep). Fmod and Mod are per type (binary_ops_i32.wgsl, binary_ops_u32.wgsl).
fn op_BitwiseAnd(a: T, b: T) -> T { return a & b; }
fn op_BitwiseOr(a: T, b: T) -> T { return a | b; }
fn op_BitwiseXor(a: T, b: T) -> T { return a ^ b; }
fn op_Max(a: T, b: T) -> T { return max(a, b); }
fn op_Min(a: T, b: T) -> T { return min(a, b); }
fn op_Div(a: T, b: T) -> T { return a / b; }

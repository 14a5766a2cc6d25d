// Binary ops of both integer types (alias T: i32 or u32). Bare max/min are exact on integers
// (no NaN to keep). Fmod is Mod with fmod=1: the remainder takes the sign of the dividend,
// which is WGSL's `%`.
fn op_BitwiseAnd(a: T, b: T) -> T { return a & b; }
fn op_BitwiseOr(a: T, b: T) -> T { return a | b; }
fn op_BitwiseXor(a: T, b: T) -> T { return a ^ b; }
fn op_Max(a: T, b: T) -> T { return max(a, b); }
fn op_Min(a: T, b: T) -> T { return min(a, b); }
fn op_Fmod(a: T, b: T) -> T { return a % b; }

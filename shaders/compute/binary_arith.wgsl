// Arithmetic binary ops, one function op_<ONNX name> each, written once for every element
// type: the including shader defines `alias T` (f32, i32, u32, or vec4<f32> in
// binary_vec4.wgsl). Div is per type: floats divide correctly rounded (div_f, div_f4).
fn op_Add(a: T, b: T) -> T { return a + b; }
fn op_Sub(a: T, b: T) -> T { return a - b; }
fn op_Mul(a: T, b: T) -> T { return a * b; }

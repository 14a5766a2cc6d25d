// Binary ops on u32 operands, and on bool (stored as a u32 0 or 1; binary.wgsl includes
// binary_ops_<T>.wgsl).
//!include compute/binary_arith.wgsl
//!include compute/binary_compare.wgsl
//!include compute/binary_int.wgsl

// without a sign, Mod with fmod=0 is the plain remainder
fn op_Mod(a: u32, b: u32) -> u32 { return a % b; }
fn op_Fmod(a: u32, b: u32) -> u32 { return a % b; }

// ONNX BitShift gives 0 for a shift of 32 or more, where WGSL's result is undefined
fn op_BitShiftLeft(a: u32, b: u32) -> u32 { return select(0u, a << b, b < 32u); }
fn op_BitShiftRight(a: u32, b: u32) -> u32 { return select(0u, a >> b, b < 32u); }

// logic on bool operands
fn op_And(a: u32, b: u32) -> u32 { return a & b; }
fn op_Or(a: u32, b: u32) -> u32 { return a | b; }
fn op_Xor(a: u32, b: u32) -> u32 { return a ^ b; }

// Conversions between element kinds for unary.wgsl, op_Cast_<from>_<to>: f32, i32, u32,
// bool (u32 0/1) and i64 (vec2<u32> words, compute/int64.wgsl). int32 <-> int64 is exact
// (to int32 wraps like NumPy); float32 -> int64 exact; int64 -> float32 rounds beyond 2^31.
// op_Scale multiplies by A (Mean's division by its input count).

//!include compute/int64.wgsl

fn op_Cast_f32_i32(x: f32, A: f32, B: f32, C: f32) -> i32 { return i32(x); }
fn op_Cast_f32_u32(x: f32, A: f32, B: f32, C: f32) -> u32 { return u32(max(x, 0.0)); }
fn op_Cast_f32_bool(x: f32, A: f32, B: f32, C: f32) -> u32 { return u32(x != 0.0); }
fn op_Cast_i32_f32(x: i32, A: f32, B: f32, C: f32) -> f32 { return f32(x); }
fn op_Cast_u32_f32(x: u32, A: f32, B: f32, C: f32) -> f32 { return f32(x); }
fn op_Cast_bool_f32(x: u32, A: f32, B: f32, C: f32) -> f32 { return f32(x); }
fn op_Cast_i32_u32(x: i32, A: f32, B: f32, C: f32) -> u32 { return u32(x); }
fn op_Cast_u32_i32(x: u32, A: f32, B: f32, C: f32) -> i32 { return i32(x); }
fn op_Cast_i32_bool(x: i32, A: f32, B: f32, C: f32) -> u32 { return u32(x != 0); }
fn op_Cast_u32_bool(x: u32, A: f32, B: f32, C: f32) -> u32 { return u32(x != 0u); }
fn op_Cast_bool_i32(x: u32, A: f32, B: f32, C: f32) -> i32 { return i32(x); }
fn op_Cast_bool_u32(x: u32, A: f32, B: f32, C: f32) -> u32 { return x; }
fn op_Cast_i64_f32(x: vec2<u32>, A: f32, B: f32, C: f32) -> f32 { return i64_to_f32(x); }
fn op_Cast_i64_i32(x: vec2<u32>, A: f32, B: f32, C: f32) -> i32 { return bitcast<i32>(x.x); }
fn op_Cast_i64_u32(x: vec2<u32>, A: f32, B: f32, C: f32) -> u32 { return x.x; }
fn op_Cast_i64_bool(x: vec2<u32>, A: f32, B: f32, C: f32) -> u32 {
    return u32(any(x != vec2<u32>(0u)));
}
fn op_Cast_f32_i64(x: f32, A: f32, B: f32, C: f32) -> vec2<u32> { return f32_to_i64(x); }
fn op_Cast_i32_i64(x: i32, A: f32, B: f32, C: f32) -> vec2<u32> { return i32_to_i64(x); }
fn op_Cast_u32_i64(x: u32, A: f32, B: f32, C: f32) -> vec2<u32> { return vec2<u32>(x, 0u); }
fn op_Cast_bool_i64(x: u32, A: f32, B: f32, C: f32) -> vec2<u32> { return vec2<u32>(x, 0u); }

fn op_Scale(x: f32, A: f32, B: f32, C: f32) -> f32 { return x * A; }

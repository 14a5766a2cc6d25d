// The unary elementwise ops of engine/ops/activations.py, one function per op:
//   fn op_<OnnxName>(x: f32, A: f32, B: f32, C: f32) -> f32
// A, B, C are the op's attributes in the order of its record (defaults filled in there).
// The including shader selects one by templating the op name into the call; GPU_COMPUTE
// also applies them to Conv/Gemm results as fused activations, GPU_PIXEL per texel
// component (pixel/act4.wgsl). No template placeholders here: this file is included as is.
// NaN stays NaN where ONNX (NumPy) keeps it: bounds go through math.wgsl's relu_f/clamp_f,
// never a bare max/min/clamp, whose result for a NaN is the implementation's choice.
// Typed forms op_<Name>_<type> (ints, bool) run on GPU_COMPUTE's integer and bool tensors.

//!include common/math.wgsl

fn op_Identity(x: f32, A: f32, B: f32, C: f32) -> f32 { return x; }

// -- activations fusable into Conv/Gemm -------------------------------------------------------
fn op_Relu(x: f32, A: f32, B: f32, C: f32) -> f32 { return relu_f(x); }
// A = alpha
fn op_LeakyRelu(x: f32, A: f32, B: f32, C: f32) -> f32 { return select(A * x, x, x >= 0.0); }
// A = min, B = max
fn op_Clip(x: f32, A: f32, B: f32, C: f32) -> f32 { return clamp_f(x, A, B); }
fn op_Sigmoid(x: f32, A: f32, B: f32, C: f32) -> f32 { return sigmoid_f(x); }
// A = alpha, B = beta
fn op_HardSigmoid(x: f32, A: f32, B: f32, C: f32) -> f32 { return clamp_f(A * x + B, 0.0, 1.0); }
fn op_Tanh(x: f32, A: f32, B: f32, C: f32) -> f32 { return tanh_f(x); }

// -- other activations --------------------------------------------------------------------------
// A = alpha
fn op_Elu(x: f32, A: f32, B: f32, C: f32) -> f32 { return select(A * (exp(x) - 1.0), x, x > 0.0); }
// A = alpha, B = gamma
fn op_Selu(x: f32, A: f32, B: f32, C: f32) -> f32 {
    return select(B * A * (exp(x) - 1.0), B * x, x > 0.0);
}
// A = alpha
fn op_Celu(x: f32, A: f32, B: f32, C: f32) -> f32 {
    return relu_f(x) + min(0.0, A * (exp(x / A) - 1.0));
}
// A = alpha
fn op_ThresholdedRelu(x: f32, A: f32, B: f32, C: f32) -> f32 { return select(0.0, x, x > A); }
fn op_Softplus(x: f32, A: f32, B: f32, C: f32) -> f32 { return softplus_f(x); }
fn op_Softsign(x: f32, A: f32, B: f32, C: f32) -> f32 { return x / (1.0 + abs(x)); }
fn op_Mish(x: f32, A: f32, B: f32, C: f32) -> f32 { return x * tanh_f(softplus_f(x)); }
fn op_HardSwish(x: f32, A: f32, B: f32, C: f32) -> f32 {
    return x * clamp_f(x / 6.0 + 0.5, 0.0, 1.0);
}
// A = bias, B = lambd
fn op_Shrink(x: f32, A: f32, B: f32, C: f32) -> f32 {
    return select(select(0.0, x + A, x < -B), x - A, x > B);
}
// A = approximate: 0 "none" (erf), 1 "tanh"
fn op_Gelu(x: f32, A: f32, B: f32, C: f32) -> f32 {
    if (A > 0.5) {
        return 0.5 * x * (1.0 + tanh_f(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    }
    return 0.5 * x * (1.0 + erf_f(x * 0.7071067811865476));
}
// A = alpha: x * sigmoid(alpha * x)
fn op_Swish(x: f32, A: f32, B: f32, C: f32) -> f32 { return x * sigmoid_f(A * x); }

// -- maths -----------------------------------------------------------------------------------
fn op_Exp(x: f32, A: f32, B: f32, C: f32) -> f32 { return exp(x); }
fn op_Log(x: f32, A: f32, B: f32, C: f32) -> f32 { return log(x); }
fn op_Sqrt(x: f32, A: f32, B: f32, C: f32) -> f32 { return sqrt(x); }
fn op_Reciprocal(x: f32, A: f32, B: f32, C: f32) -> f32 { return 1.0 / x; }
fn op_Sin(x: f32, A: f32, B: f32, C: f32) -> f32 { return sin(x); }
fn op_Cos(x: f32, A: f32, B: f32, C: f32) -> f32 { return cos(x); }
fn op_Tan(x: f32, A: f32, B: f32, C: f32) -> f32 { return tan(x); }
// via atan2: lavapipe's asin/acos lose ~3 digits near +-1; NaN outside [-1, 1] (atan2 of
// a NaN root gave 0 for the infinities)
fn op_Asin(x: f32, A: f32, B: f32, C: f32) -> f32 {
    let y = atan2(x, sqrt((1.0 - x) * (1.0 + x)));
    return select(y, bitcast<f32>(0x7fc00000u), is_nan_f(x) || abs(x) > 1.0);
}
fn op_Acos(x: f32, A: f32, B: f32, C: f32) -> f32 {
    let y = atan2(sqrt((1.0 - x) * (1.0 + x)), x);
    return select(y, bitcast<f32>(0x7fc00000u), is_nan_f(x) || abs(x) > 1.0);
}
fn op_Atan(x: f32, A: f32, B: f32, C: f32) -> f32 { return select(atan(x), x, is_nan_f(x)); }
// e^|x| / 2 as exp(|x| - ln 2): finite up to |x| = 89.4 where e^|x| alone overflows at 88.7
fn op_Sinh(x: f32, A: f32, B: f32, C: f32) -> f32 {
    let a = abs(x);
    if (a < 1.0) { return sinh(x); }
    let h = exp(a - 0.6931472) - exp(-a - 0.6931472);
    return select(h, -h, x < 0.0);
}
fn op_Cosh(x: f32, A: f32, B: f32, C: f32) -> f32 {
    let a = abs(x);
    if (a < 1.0) { return cosh(x); }
    return exp(a - 0.6931472) + exp(-a - 0.6931472);
}
// log(|x| + sqrt(x^2 + 1)) overflows in x^2 past 1.8e19: there asinh(x) = log(2|x|) to f32
fn op_Asinh(x: f32, A: f32, B: f32, C: f32) -> f32 {
    let a = abs(x);
    if (!(a > 1e18)) { return asinh(x); }
    let h = log(a) + 0.6931472;
    return select(h, -h, x < 0.0);
}
// NaN below 1; past 1.8e19, where x^2 overflows, log(2x) to f32
fn op_Acosh(x: f32, A: f32, B: f32, C: f32) -> f32 {
    if (is_nan_f(x) || x < 1.0) { return bitcast<f32>(0x7fc00000u); }
    if (x > 1e18) { return log(x) + 0.6931472; }
    return acosh(x);
}
fn op_Atanh(x: f32, A: f32, B: f32, C: f32) -> f32 { return atanh(x); }
fn op_Ceil(x: f32, A: f32, B: f32, C: f32) -> f32 { return ceil(x); }
fn op_Floor(x: f32, A: f32, B: f32, C: f32) -> f32 { return floor(x); }
// WGSL's round is half to even, like ONNX's
fn op_Round(x: f32, A: f32, B: f32, C: f32) -> f32 { return round(x); }
fn op_Erf(x: f32, A: f32, B: f32, C: f32) -> f32 { return erf_f(x); }
fn op_Abs(x: f32, A: f32, B: f32, C: f32) -> f32 { return abs(x); }
fn op_Neg(x: f32, A: f32, B: f32, C: f32) -> f32 { return -x; }
fn op_Sign(x: f32, A: f32, B: f32, C: f32) -> f32 { return select(sign(x), x, is_nan_f(x)); }

// -- typed forms (GPU_COMPUTE's integer and bool tensors; bool is u32 0/1) ----------------------
fn op_Relu_i32(x: i32, A: f32, B: f32, C: f32) -> i32 { return max(x, 0); }
fn op_Abs_i32(x: i32, A: f32, B: f32, C: f32) -> i32 { return abs(x); }
fn op_Neg_i32(x: i32, A: f32, B: f32, C: f32) -> i32 { return -x; }
fn op_Sign_i32(x: i32, A: f32, B: f32, C: f32) -> i32 { return sign(x); }
fn op_Not_u32(x: u32, A: f32, B: f32, C: f32) -> u32 { return x ^ 1u; }
fn op_BitwiseNot_i32(x: i32, A: f32, B: f32, C: f32) -> i32 { return ~x; }
fn op_BitwiseNot_u32(x: u32, A: f32, B: f32, C: f32) -> u32 { return ~x; }
fn op_IsNaN(x: f32, A: f32, B: f32, C: f32) -> u32 { return u32(is_nan_f(x)); }
// A = detect_negative, B = detect_positive
fn op_IsInf(x: f32, A: f32, B: f32, C: f32) -> u32 {
    return u32(is_inf_f(x) && ((x > 0.0 && B != 0.0) || (x < 0.0 && A != 0.0)));
}

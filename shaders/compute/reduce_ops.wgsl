// The reductions of reduce.wgsl, named after their ONNX ops: init_<op>() is the value of an
// empty reduction, fold_<op>(acc, v, top) folds in one element v, finish_<op>(acc, count,
// top) gives the result (count: the number of reduced elements). two_pass_<op>() asks for
// a first pass that finds the maximum `top` (ReduceLogSumExp shifts by it so exp cannot
// overflow); otherwise top is -inf and unused. Max and Min keep a NaN (max_f/min_f).
// (functions: naga has no bitcast in constant expressions)
fn neg_inf_f() -> f32 { return bitcast<f32>(0xff800000u); }
fn pos_inf_f() -> f32 { return bitcast<f32>(0x7f800000u); }

fn init_ReduceSum() -> f32 { return 0.0; }
fn fold_ReduceSum(acc: f32, v: f32, top: f32) -> f32 { return acc + v; }
fn finish_ReduceSum(acc: f32, count: f32, top: f32) -> f32 { return acc; }
fn two_pass_ReduceSum() -> bool { return false; }

fn init_ReduceMean() -> f32 { return 0.0; }
fn fold_ReduceMean(acc: f32, v: f32, top: f32) -> f32 { return acc + v; }
fn finish_ReduceMean(acc: f32, count: f32, top: f32) -> f32 { return acc / count; }
fn two_pass_ReduceMean() -> bool { return false; }

fn init_ReduceMax() -> f32 { return neg_inf_f(); }
fn fold_ReduceMax(acc: f32, v: f32, top: f32) -> f32 { return max_f(acc, v); }
fn finish_ReduceMax(acc: f32, count: f32, top: f32) -> f32 { return acc; }
fn two_pass_ReduceMax() -> bool { return false; }

fn init_ReduceMin() -> f32 { return pos_inf_f(); }
fn fold_ReduceMin(acc: f32, v: f32, top: f32) -> f32 { return min_f(acc, v); }
fn finish_ReduceMin(acc: f32, count: f32, top: f32) -> f32 { return acc; }
fn two_pass_ReduceMin() -> bool { return false; }

fn init_ReduceProd() -> f32 { return 1.0; }
fn fold_ReduceProd(acc: f32, v: f32, top: f32) -> f32 { return acc * v; }
fn finish_ReduceProd(acc: f32, count: f32, top: f32) -> f32 { return acc; }
fn two_pass_ReduceProd() -> bool { return false; }

fn init_ReduceL1() -> f32 { return 0.0; }
fn fold_ReduceL1(acc: f32, v: f32, top: f32) -> f32 { return acc + abs(v); }
fn finish_ReduceL1(acc: f32, count: f32, top: f32) -> f32 { return acc; }
fn two_pass_ReduceL1() -> bool { return false; }

fn init_ReduceL2() -> f32 { return 0.0; }
fn fold_ReduceL2(acc: f32, v: f32, top: f32) -> f32 { return acc + v * v; }
fn finish_ReduceL2(acc: f32, count: f32, top: f32) -> f32 { return sqrt(acc); }
fn two_pass_ReduceL2() -> bool { return false; }

fn init_ReduceLogSum() -> f32 { return 0.0; }
fn fold_ReduceLogSum(acc: f32, v: f32, top: f32) -> f32 { return acc + v; }
fn finish_ReduceLogSum(acc: f32, count: f32, top: f32) -> f32 { return log(acc); }
fn two_pass_ReduceLogSum() -> bool { return false; }

fn init_ReduceLogSumExp() -> f32 { return 0.0; }
fn fold_ReduceLogSumExp(acc: f32, v: f32, top: f32) -> f32 { return acc + exp(v - top); }
fn finish_ReduceLogSumExp(acc: f32, count: f32, top: f32) -> f32 { return log(acc) + top; }
fn two_pass_ReduceLogSumExp() -> bool { return true; }

fn init_ReduceSumSquare() -> f32 { return 0.0; }
fn fold_ReduceSumSquare(acc: f32, v: f32, top: f32) -> f32 { return acc + v * v; }
fn finish_ReduceSumSquare(acc: f32, count: f32, top: f32) -> f32 { return acc; }
fn two_pass_ReduceSumSquare() -> bool { return false; }

// Softmax / LogSoftmax / Hardmax along one axis: one line (length L, stride inner) per
// invocation. The output of each element is out_${OP} of the element v, the line's maximum
// top (at index `at`: the first NaN's when the line holds one, as NumPy's argmax and so the
// ONNX reference's Hardmax pick it), the sum of exp(v - top) and its log.
// zero: always 0 (a run-time zero: a +inf maximum times it is NaN, which a literal 0 would
// let the compiler fold away)
struct Params { n: i32, L: i32, inner: i32, zero: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

//!include common/math.wgsl

//!include compute/softmax_ops.wgsl

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 64u);
    if (i >= p.n) { return; }
    let L = p.L;
    let inner = p.inner;
    let base = (i / inner) * L * inner + i % inner;
    // the maximum and the sum of exp(v - maximum) in one pass, the sum rescaled when the
    // maximum grows; a value equal to the maximum adds exp(0) = 1 (computed, exp(-inf - -inf)
    // would be NaN before a finite maximum arrives)
    var top = x[base];
    var at = 0;
    var sum = 1.0;
    // (bit tests: a compiler may fold v != v away)
    let find_nan = first_nan_${OP}();
    var nan_at = select(-1, 0, find_nan && is_nan_f(top));
    for (var j = 1; j < L; j++) {
        let v = x[base + j * inner];
        if (find_nan && nan_at < 0 && is_nan_f(v)) {
            nan_at = j;
        }
        if (v > top) {
            sum = sum * exp(top - v) + 1.0;
            top = v;
            at = j;
        } else if (v == top) {
            sum += 1.0;
        } else {
            sum += exp(v - top);
        }
    }
    if (nan_at >= 0) {
        at = nan_at;
    }
    if (top > 3.4028235e38) {
        sum = top * f32(p.zero);  // the spec's exp(inf - inf) in the sum: the row is NaN
    }
    let lsum = log(sum);
    for (var j = 0; j < L; j++) {
        let v = x[base + j * inner];
        y[base + j * inner] = out_${OP}(v, j, top, at, sum, lsum);
    }
}

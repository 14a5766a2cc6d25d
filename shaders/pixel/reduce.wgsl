// Reductions and softmax-like ops over a set of axes, one output element per component.
// i[0..1] = for each input axis, the output axis it follows (-1: a reduced axis)
// i[2] = (reduced-axis bit mask, reduced element count). Op ${OP}; NEEDS_MAX = ${NEEDS_MAX}.

@group(0) @binding(1) var X: texture_2d<f32>;

fn six(a: vec4<i32>, b: vec4<i32>, k: u32) -> i32 {
    if (k < 4u) {
        return a[k];
    }
    return b[k - 4u];
}

fn init_sum() -> f32 { return 0.0; }
fn init_prod() -> f32 { return 1.0; }
fn init_max() -> f32 { return -f_inf(); }
fn init_min() -> f32 { return f_inf(); }

fn r_ReduceSum(a: f32, v: f32, m: f32) -> f32 { return a + v; }
fn r_ReduceMean(a: f32, v: f32, m: f32) -> f32 { return a + v; }
fn r_ReduceMax(a: f32, v: f32, m: f32) -> f32 { return max1(a, v); }
fn r_ReduceMin(a: f32, v: f32, m: f32) -> f32 { return min1(a, v); }
fn r_ReduceProd(a: f32, v: f32, m: f32) -> f32 { return a * v; }
fn r_ReduceL1(a: f32, v: f32, m: f32) -> f32 { return a + abs(v); }
fn r_ReduceL2(a: f32, v: f32, m: f32) -> f32 { return a + v * v; }
fn r_ReduceSumSquare(a: f32, v: f32, m: f32) -> f32 { return a + v * v; }
fn r_ReduceLogSum(a: f32, v: f32, m: f32) -> f32 { return a + v; }
// an infinite maximum shifts by 0: exp(inf - inf) would make a NaN of +-inf
fn lse_shift(m: f32) -> f32 {
    return select(m, 0.0, (bitcast<u32>(m) & 0x7fffffffu) == 0x7f800000u);
}
fn r_ReduceLogSumExp(a: f32, v: f32, m: f32) -> f32 { return a + exp(v - lse_shift(m)); }
fn r_Softmax(a: f32, v: f32, m: f32) -> f32 { return a + exp(v - m); }
fn r_LogSoftmax(a: f32, v: f32, m: f32) -> f32 { return a + exp(v - m); }

// a: accumulated value, m: maximum, n: element count, x: the element itself
fn f_ReduceSum(a: f32, m: f32, n: f32, x: f32) -> f32 { return a; }
fn f_ReduceMean(a: f32, m: f32, n: f32, x: f32) -> f32 { return a / n; }
fn f_ReduceMax(a: f32, m: f32, n: f32, x: f32) -> f32 { return a; }
fn f_ReduceMin(a: f32, m: f32, n: f32, x: f32) -> f32 { return a; }
fn f_ReduceProd(a: f32, m: f32, n: f32, x: f32) -> f32 { return a; }
fn f_ReduceL1(a: f32, m: f32, n: f32, x: f32) -> f32 { return a; }
fn f_ReduceL2(a: f32, m: f32, n: f32, x: f32) -> f32 { return sqrt(a); }
fn f_ReduceSumSquare(a: f32, m: f32, n: f32, x: f32) -> f32 { return a; }
fn f_ReduceLogSum(a: f32, m: f32, n: f32, x: f32) -> f32 { return log(a); }
fn f_ReduceLogSumExp(a: f32, m: f32, n: f32, x: f32) -> f32 { return lse_shift(m) + log(a); }
fn f_Softmax(a: f32, m: f32, n: f32, x: f32) -> f32 { return exp(x - m) / a; }
fn f_LogSoftmax(a: f32, m: f32, n: f32, x: f32) -> f32 { return (x - m) - log(a); }

fn nth(base: array<u32, 6>, r: u32) -> array<u32, 6> {
    let d = dims6(U.t[0]);
    let mask = u32(U.i[2].x);
    var idx = base;
    var t = r;
    for (var k = 5; k >= 0; k--) {
        if ((mask & (1u << u32(k))) != 0u) {
            idx[k] = t % d[k];
            t = t / d[k];
        }
    }
    return idx;
}

fn reduce_elem(e: array<u32, 6>) -> f32 {
    var base: array<u32, 6>;
    for (var k = 0u; k < 6u; k++) {
        let src = six(U.i[0], U.i[1], k);
        base[k] = select(0u, e[max(src, 0)], src >= 0);
    }
    let n = u32(U.i[2].y);
    var m = -f_inf();
    if (${NEEDS_MAX}) {
        for (var r = 0u; r < n; r++) {
            m = max1(m, load_elem(X, U.t[0], nth(base, r)));
        }
    }
    var a = init_${INIT}();
    for (var r = 0u; r < n; r++) {
        a = r_${OP}(a, load_elem(X, U.t[0], nth(base, r)), m);
    }
    var x = 0.0;
    if (${NEEDS_SELF}) {
        x = load_elem(X, U.t[0], e);  // softmax-like: input and output shapes agree
    }
    return f_${OP}(a, m, f32(n), x);
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return reduce_elem(e);
}

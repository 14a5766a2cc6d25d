// Max and average pooling over 2-D windows (dilation 1; a 1-D pool has H = 1): every
// invocation computes 8 neighbouring outputs along one output row of one plane. The 8 inputs
// a tap needs form a window (two vec4s) that slides by one input from tap kw to tap kw + SW
// (as in conv_depthwise.wgsl), so a window row loads 8*SW + KW - SW inputs instead of 8*KW,
// and the plane comes from the workgroup id: no integer division per output. Window size and
// strides are fixed at specialisation. MODE 0: max (NaN propagates), 1: average; the average
// counts the padded taps when p.include_pad != 0 (pads_end = eh, ew, as pool2d.wgsl).
struct Params {
    C: i32, H: i32, W: i32, runs: i32,
    OH: i32, OW: i32, KH: i32, KW: i32,
    sh: i32, sw: i32, ph: i32, pw: i32,
    dh: i32, dw: i32, mode: i32, include_pad: i32,
    eh: i32, ew: i32, lp: f32, pad0: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

//!include common/math.wgsl

const KH: i32 = ${KH};
const KW: i32 = ${KW};
const SH: i32 = ${SH};
const SW: i32 = ${SW};
const MODE: i32 = ${MODE};

// what a tap outside the image contributes: nothing to a max, 0 to a sum
fn fill() -> f32 {
    if (MODE == 0) { return bitcast<f32>(0xff800000u); }
    return 0.0;
}

fn at(row: i32, iw: i32, wm: i32) -> f32 {
    return select(fill(), x[row + clamp(iw, 0, wm)], iw >= 0 && iw <= wm);
}

fn fold(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    if (MODE == 0) {
        return vec4<f32>(max_f(a.x, b.x), max_f(a.y, b.y), max_f(a.z, b.z), max_f(a.w, b.w));
    }
    return a + b;
}

// taps of a window starting at i0 that lie in [lo, hi)
fn taps(i0: i32, k: i32, lo: i32, hi: i32) -> i32 {
    return max(min(i0 + k, hi) - max(i0, lo), 0);
}

// the average's divisors of 4 outputs whose windows start at column iw (separable: rows x
// columns, the padded taps counted when include_pad is set)
fn counts(ih0: i32, iw: i32, H: i32) -> vec4<f32> {
    let starts = vec4<i32>(iw) + vec4<i32>(0, SW, 2 * SW, 3 * SW);
    var lo = vec2<i32>(0, 0);
    var hi = vec2<i32>(H, p.W);
    if (p.include_pad != 0) {
        lo = vec2<i32>(-p.ph, -p.pw);
        hi = vec2<i32>(H + p.eh, p.W + p.ew);
    }
    let rows = taps(ih0, KH, lo.x, hi.x);
    let cols = vec4<i32>(taps(starts.x, KW, lo.y, hi.y), taps(starts.y, KW, lo.y, hi.y),
                         taps(starts.z, KW, lo.y, hi.y), taps(starts.w, KW, lo.y, hi.y));
    return vec4<f32>(max(vec4<i32>(rows) * cols, vec4<i32>(1)));
}

// x: runs of 8 outputs of one output row; y: plane (image x channel)
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>,
        @builtin(workgroup_id) wg: vec3<u32>) {
    let t = i32(g.x);
    let plane = i32(wg.y);
    if (t >= p.runs * p.OH) { return; }
    let oh = t / p.runs;
    let ow0 = (t % p.runs) * 8;
    let H = p.H;
    let wm = p.W - 1;
    let base = plane * H * p.W;
    let iw0 = ow0 * SW - p.pw;
    let ih0 = oh * SH - p.ph;
    var lo = vec4<f32>(fill());  // outputs ow0 .. ow0 + 3
    var hi = vec4<f32>(fill());  // outputs ow0 + 4 .. ow0 + 7
    for (var kh = 0; kh < KH; kh++) {
        let ih = ih0 + kh;
        if (ih < 0 || ih >= H) { continue; }
        let row = base + ih * p.W;
        for (var ph = 0; ph < min(SW, KW); ph++) {
            let i = iw0 + ph;
            var w0 = vec4<f32>(at(row, i, wm), at(row, i + SW, wm), at(row, i + 2 * SW, wm),
                               at(row, i + 3 * SW, wm));
            var w1 = vec4<f32>(at(row, i + 4 * SW, wm), at(row, i + 5 * SW, wm),
                               at(row, i + 6 * SW, wm), at(row, i + 7 * SW, wm));
            for (var kw = ph; kw < KW; kw += SW) {
                lo = fold(lo, w0);
                hi = fold(hi, w1);
                if (kw + SW < KW) {
                    w0 = vec4<f32>(w0.yzw, w1.x);
                    w1 = vec4<f32>(w1.yzw, at(row, iw0 + kw + 8 * SW, wm));
                }
            }
        }
    }
    if (MODE == 1) {
        // the window's tap counts are separable: rows x columns
        lo /= counts(ih0, iw0, H);
        hi /= counts(ih0, iw0 + 4 * SW, H);
    }
    let o = (plane * p.OH + oh) * p.OW + ow0;
    let left = p.OW - ow0;
    y[o] = lo.x;
    if (left > 1) { y[o + 1] = lo.y; }
    if (left > 2) { y[o + 2] = lo.z; }
    if (left > 3) { y[o + 3] = lo.w; }
    if (left > 4) { y[o + 4] = hi.x; }
    if (left > 5) { y[o + 5] = hi.y; }
    if (left > 6) { y[o + 6] = hi.z; }
    if (left > 7) { y[o + 7] = hi.w; }
}

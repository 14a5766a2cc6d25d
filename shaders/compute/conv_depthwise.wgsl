// Depthwise 2-D convolution (one input channel per group, any channel multiplier, dilation 1):
// every invocation computes 8 neighbouring outputs along one output row of one channel. The
// 8 inputs a tap needs form a window (two vec4s); the window of tap kw + SW is the window of
// tap kw moved by one input, so each tap after the first SW of a kernel row loads one input
// instead of 8, and each weight load serves 8 outputs.
// No private arrays (on CPU adapters an indexed array lives in memory, not in registers).
// Kernel size and strides are fixed at specialisation. Weights in ONNX layout [M][1][KH][KW].
//!include compute/conv_params.wgsl

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

//!include compute/conv_row_helpers.wgsl

const KH: i32 = ${KH};
const KW: i32 = ${KW};
const SH: i32 = ${SH};
const SW: i32 = ${SW};

// x: runs of 8 outputs of one output row (p.last = runs per row); y: output channel; z: image.
// The channel and image come from the workgroup id: uniform, so weight loads are not gathers.
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>,
        @builtin(workgroup_id) wg: vec3<u32>) {
    let runs = p.last;
    let t = i32(g.x);
    let m = i32(wg.y);
    let n = i32(wg.z);
    if (t >= runs * p.OH) { return; }
    let oh = t / runs;
    let ow0 = (t % runs) * 8;
    let H = p.H;
    let wm = p.W - 1;
    let base = (n * p.C + m / p.Mg) * H * p.W;
    let iw0 = ow0 * SW - p.pw;
    let ih0 = oh * SH - p.ph;
    let wbase = m * KH * KW;
    var lo = vec4<f32>(0.0);  // outputs ow0 .. ow0 + 3
    var hi = vec4<f32>(0.0);  // outputs ow0 + 4 .. ow0 + 7
    for (var kh = 0; kh < KH; kh++) {
        let ih = ih0 + kh;
        if (ih < 0 || ih >= H) { continue; }
        let row = base + ih * p.W;
        // one sliding window per phase of the stride
        for (var ph = 0; ph < min(SW, KW); ph++) {
            let i = iw0 + ph;
            var w0 = vec4<f32>(at(row, i, wm), at(row, i + SW, wm), at(row, i + 2 * SW, wm),
                               at(row, i + 3 * SW, wm));
            var w1 = vec4<f32>(at(row, i + 4 * SW, wm), at(row, i + 5 * SW, wm),
                               at(row, i + 6 * SW, wm), at(row, i + 7 * SW, wm));
            for (var kw = ph; kw < KW; kw += SW) {
                let wv = w[wbase + kh * KW + kw];
                lo += w0 * wv;
                hi += w1 * wv;
                if (kw + SW < KW) {
                    w0 = vec4<f32>(w0.yzw, w1.x);
                    w1 = vec4<f32>(w1.yzw, at(row, iw0 + kw + 8 * SW, wm));
                }
            }
        }
    }
    var b = 0.0;
    if (p.has_bias != 0) { b = bias[m]; }
    let A = p.act_a;
    let B = p.act_b;
    let o = ((n * p.M + m) * p.OH + oh) * p.OW + ow0;
    let left = p.OW - ow0;
    y[o] = act(lo.x + b, A, B);
    if (left > 1) { y[o + 1] = act(lo.y + b, A, B); }
    if (left > 2) { y[o + 2] = act(lo.z + b, A, B); }
    if (left > 3) { y[o + 3] = act(lo.w + b, A, B); }
    if (left > 4) { y[o + 4] = act(hi.x + b, A, B); }
    if (left > 5) { y[o + 5] = act(hi.y + b, A, B); }
    if (left > 6) { y[o + 6] = act(hi.z + b, A, B); }
    if (left > 7) { y[o + 7] = act(hi.w + b, A, B); }
}

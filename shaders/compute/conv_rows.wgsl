// Direct 2-D convolution without an im2col buffer (dilation 1 along the row): every
// invocation computes 8 neighbouring outputs along one output row for a quad of 4 output
// channels. As in conv_depthwise.wgsl, the 8 inputs a tap needs form a window (two vec4s)
// that slides by one input from tap kw to tap kw + SW, so a kernel row of one input channel
// loads 8*SW + KW - SW inputs and feeds 32 multiply-adds per tap. Weights are pre-packed as
// [M4/4][Cg*KH*KW] vec4s (kernels_conv._pack_weights): the quad's weights of one tap in one
// load, the same for the whole workgroup. Needs channels per group to be a multiple of 4
// unless there is one group. No private arrays (on CPU adapters they live in memory).
//!include compute/conv_params.wgsl

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

//!include compute/conv_row_helpers.wgsl

const KH: i32 = ${KH};
const KW: i32 = ${KW};
const SH: i32 = ${SH};
const SW: i32 = ${SW};
const DH: i32 = ${DH};

// output channel m's 4 results (v) at o.., bias and activation applied; left = outputs left
// in the row (none: nothing to store)
fn emit(m: i32, o: i32, left: i32, v: vec4<f32>) {
    if (m >= p.M || left <= 0) { return; }
    var b = 0.0;
    if (p.has_bias != 0) { b = bias[m]; }
    let A = p.act_a;
    let B = p.act_b;
    y[o] = act(v.x + b, A, B);
    if (left > 1) { y[o + 1] = act(v.y + b, A, B); }
    if (left > 2) { y[o + 2] = act(v.z + b, A, B); }
    if (left > 3) { y[o + 3] = act(v.w + b, A, B); }
}

// x: runs of 8 outputs of one output row (p.last = runs per row); y: channel quad; z: image.
// The quad and image come from the workgroup id: uniform, so weight loads are not gathers.
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>,
        @builtin(workgroup_id) wg: vec3<u32>) {
    let runs = p.last;
    let t = i32(g.x);
    let q = i32(wg.y);
    let n = i32(wg.z);
    if (t >= runs * p.OH) { return; }
    let oh = t / runs;
    let ow0 = (t % runs) * 8;
    let m0 = q * 4;
    let H = p.H;
    let wm = p.W - 1;
    let HW = H * p.W;
    let Cg = p.Cg;
    let cbase = n * p.C + (m0 / p.Mg) * Cg;
    let iw0 = ow0 * SW - p.pw;
    let ih0 = oh * SH - p.ph;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var b0 = vec4<f32>(0.0);
    var b1 = vec4<f32>(0.0);
    var b2 = vec4<f32>(0.0);
    var b3 = vec4<f32>(0.0);
    var k = q * Cg * KH * KW;
    for (var c = 0; c < Cg; c++) {
        let base = (cbase + c) * HW;
        for (var kh = 0; kh < KH; kh++) {
            let ih = ih0 + kh * DH;
            let kr = k + kh * KW;
            if (ih < 0 || ih >= H) { continue; }
            let row = base + ih * p.W;
            for (var ph = 0; ph < min(SW, KW); ph++) {
                let i = iw0 + ph;
                var lo = vec4<f32>(at(row, i, wm), at(row, i + SW, wm),
                                   at(row, i + 2 * SW, wm), at(row, i + 3 * SW, wm));
                var hi = vec4<f32>(at(row, i + 4 * SW, wm), at(row, i + 5 * SW, wm),
                                   at(row, i + 6 * SW, wm), at(row, i + 7 * SW, wm));
                for (var kw = ph; kw < KW; kw += SW) {
                    let wv = w[kr + kw];
                    a0 += lo * wv.x;
                    a1 += lo * wv.y;
                    a2 += lo * wv.z;
                    a3 += lo * wv.w;
                    b0 += hi * wv.x;
                    b1 += hi * wv.y;
                    b2 += hi * wv.z;
                    b3 += hi * wv.w;
                    if (kw + SW < KW) {
                        lo = vec4<f32>(lo.yzw, hi.x);
                        hi = vec4<f32>(hi.yzw, at(row, iw0 + kw + 8 * SW, wm));
                    }
                }
            }
        }
        k += KH * KW;
    }
    let P = p.OH * p.OW;
    let o = (n * p.M + m0) * P + oh * p.OW + ow0;
    let left = p.OW - ow0;
    emit(m0, o, left, a0);
    emit(m0 + 1, o + P, left, a1);
    emit(m0 + 2, o + 2 * P, left, a2);
    emit(m0 + 3, o + 3 * P, left, a3);
    emit(m0, o + 4, left - 4, b0);
    emit(m0 + 1, o + P + 4, left - 4, b1);
    emit(m0 + 2, o + 2 * P + 4, left - 4, b2);
    emit(m0 + 3, o + 3 * P + 4, left - 4, b3);
}

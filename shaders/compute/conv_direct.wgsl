// Direct 2-D convolution, one output channel x 4 output pixels per invocation, any group
// count: the depthwise kernel (one input channel per group) and the fallback for groups whose
// channel count is not a multiple of 4. Weights in ONNX layout [M][Cg][KH][KW].
//!include compute/conv_params.wgsl

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

//!include common/activations.wgsl

// the fused activation (shaders/common/activations.wgsl; op_Identity when there is none)
fn act(x: f32, A: f32, B: f32) -> f32 {
    return op_${act}(x, A, B, 0.0);
}

// hw = (H, W) is passed in so it stays in registers in the tap loops
fn tap(base: i32, ih: i32, iw: i32, hw: vec2<i32>) -> f32 {
    let inside = ih >= 0 && ih < hw.x && iw >= 0 && iw < hw.y;
    return select(0.0, x[base + clamp(ih, 0, hw.x - 1) * hw.y + clamp(iw, 0, hw.y - 1)], inside);
}

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let P = p.OH * p.OW;
    let p0 = i32(g.x) * 4;
    let m = i32(g.y);
    let n = i32(g.z);
    if (p0 >= P || m >= p.M) { return; }
    let grp = m / p.Mg;
    var ih0 = vec4<i32>(0);
    var iw0 = vec4<i32>(0);
    for (var j = 0; j < 4; j++) {
        let q = min(p0 + j, P - 1);
        ih0[j] = (q / p.OW) * p.sh - p.ph;
        iw0[j] = (q % p.OW) * p.sw - p.pw;
    }
    var acc = vec4<f32>(0.0);
    let HW = p.H * p.W;
    let hw = vec2<i32>(p.H, p.W);
    let Cg = p.Cg;
    let KH = p.KH;
    let KW = p.KW;
    let dhw = vec2<i32>(p.dh, p.dw);
    let cbase = n * p.C + grp * Cg;
    var k = m * p.Cg * p.KH * p.KW;
    for (var c = 0; c < Cg; c++) {
        let base = (cbase + c) * HW;
        for (var kh = 0; kh < KH; kh++) {
            let ih = ih0 + vec4<i32>(kh * dhw.x);
            for (var kw = 0; kw < KW; kw++) {
                let iw = iw0 + vec4<i32>(kw * dhw.y);
                let wv = w[k];
                k++;
                acc += wv * vec4<f32>(tap(base, ih.x, iw.x, hw), tap(base, ih.y, iw.y, hw),
                                      tap(base, ih.z, iw.z, hw), tap(base, ih.w, iw.w, hw));
            }
        }
    }
    var b = 0.0;
    if (p.has_bias != 0) { b = bias[m]; }
    let obase = (n * p.M + m) * P;
    for (var j = 0; j < 4; j++) {
        if (p0 + j >= P) { break; }
        y[obase + p0 + j] = act(acc[j] + b, p.act_a, p.act_b);
    }
}

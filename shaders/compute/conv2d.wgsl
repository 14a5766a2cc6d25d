// 2-D convolution as an implicit GEMM: every invocation computes 4 output channels x 4 output
// pixels, gathering input pixels on the fly (no im2col buffer). Weights are pre-packed as
// [M4/4][Cg*KH*KW] vec4s: one load yields 4 channels' weights for one tap, and every
// invocation streams through contiguous memory. Needs the
// channels-per-group count to be a multiple of 4 (all 4 channels share a group).
//!include compute/conv_params.wgsl

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

//!include common/activations.wgsl

// kernel size, strides and dilations fixed at specialisation: the tap loops unroll and the
// tap offsets are constants
const KH: i32 = ${KH};
const KW: i32 = ${KW};
const SH: i32 = ${SH};
const SW: i32 = ${SW};
const DH: i32 = ${DH};
const DW: i32 = ${DW};

// the fused activation (shaders/common/activations.wgsl; op_Identity when there is none)
fn act(x: f32, A: f32, B: f32) -> f32 {
    return op_${act}(x, A, B, 0.0);
}

// hw = (H, W) is passed in so it stays in registers in the tap loops
fn tap(base: i32, ih: i32, iw: i32, hw: vec2<i32>) -> f32 {
    let inside = ih >= 0 && ih < hw.x && iw >= 0 && iw < hw.y;
    return select(0.0, x[base + clamp(ih, 0, hw.x - 1) * hw.y + clamp(iw, 0, hw.y - 1)], inside);
}

@compute @workgroup_size(16, 4, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let P = p.OH * p.OW;
    let p0 = i32(g.x) * 4;
    let m0 = i32(g.y) * 4;
    let n = i32(g.z);
    if (p0 >= P || m0 >= p.M) { return; }
    let grp = m0 / p.Mg;
    var ih0 = vec4<i32>(0);
    var iw0 = vec4<i32>(0);
    for (var j = 0; j < 4; j++) {
        let q = min(p0 + j, P - 1);
        ih0[j] = (q / p.OW) * SH - p.ph;
        iw0[j] = (q % p.OW) * SW - p.pw;
    }
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    let kk = p.Cg * KH * KW;
    let HW = p.H * p.W;
    let hw = vec2<i32>(p.H, p.W);
    let Cg = p.Cg;
    let cbase = n * p.C + grp * Cg;
    var k = (m0 / 4) * kk;
    for (var c = 0; c < Cg; c++) {
        let base = (cbase + c) * HW;
        for (var kh = 0; kh < KH; kh++) {
            let ih = ih0 + vec4<i32>(kh * DH);
            for (var kw = 0; kw < KW; kw++) {
                let iw = iw0 + vec4<i32>(kw * DW);
                let wv = w[k];
                k++;
                acc0 += tap(base, ih.x, iw.x, hw) * wv;
                acc1 += tap(base, ih.y, iw.y, hw) * wv;
                acc2 += tap(base, ih.z, iw.z, hw) * wv;
                acc3 += tap(base, ih.w, iw.w, hw) * wv;
            }
        }
    }
    var px = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    for (var i = 0; i < 4; i++) {
        let m = m0 + i;
        if (m >= p.M) { break; }
        var b = 0.0;
        if (p.has_bias != 0) { b = bias[m]; }
        let obase = (n * p.M + m) * P;
        for (var j = 0; j < 4; j++) {
            if (p0 + j >= P) { break; }
            y[obase + p0 + j] = act(px[j][i] + b, p.act_a, p.act_b);
        }
    }
}

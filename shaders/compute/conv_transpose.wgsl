// 2-D transposed convolution as a gather: each output pixel sums the input pixels whose
// strided footprint covers it. Weights in ONNX layout [C][Mg][KH][KW].
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

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.last) { return; }
    let ow = i % p.OW;
    let oh = (i / p.OW) % p.OH;
    let m = (i / (p.OW * p.OH)) % p.M;
    let b = i / (p.OW * p.OH * p.M);
    let grp = m / p.Mg;
    let mg = m % p.Mg;
    var acc = 0.0;
    for (var c = 0; c < p.Cg; c++) {
        let ci = grp * p.Cg + c;
        for (var kh = 0; kh < p.KH; kh++) {
            let th = oh + p.ph - kh * p.dh;
            if (th < 0 || th % p.sh != 0) { continue; }
            let ih = th / p.sh;
            if (ih >= p.H) { continue; }
            for (var kw = 0; kw < p.KW; kw++) {
                let tw = ow + p.pw - kw * p.dw;
                if (tw < 0 || tw % p.sw != 0) { continue; }
                let iw = tw / p.sw;
                if (iw >= p.W) { continue; }
                acc += x[((b * p.C + ci) * p.H + ih) * p.W + iw]
                     * w[((ci * p.Mg + mg) * p.KH + kh) * p.KW + kw];
            }
        }
    }
    if (p.has_bias != 0) { acc += bias[m]; }
    y[i] = act(acc, p.act_a, p.act_b);
}

// 2-D transposed convolution without dilation, kernel and strides fixed at specialisation.
// An output pixel's contributing taps are those in its phase (kh = (oh + ph) mod SH + j*SH):
// they are enumerated directly, without conv_transpose.wgsl's modulo test of every tap, and
// the loop over input channels runs innermost with fixed steps through x and w.
// Weights in ONNX layout [C][Mg][KH][KW].
//!include compute/conv_params.wgsl

const KH: i32 = ${KH};
const KW: i32 = ${KW};
const SH: i32 = ${SH};
const SW: i32 = ${SW};
const NH: i32 = (KH + SH - 1) / SH;
const NW: i32 = (KW + SW - 1) / SW;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

//!include common/activations.wgsl

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
    let th = oh + p.ph;
    let tw = ow + p.pw;
    let hw = p.H * p.W;
    let wstep = p.Mg * KH * KW;
    let xbase = (b * p.C + grp * p.Cg) * hw;
    let wbase = (grp * p.Cg * p.Mg + mg) * KH * KW;
    var acc = 0.0;
    for (var jh = 0; jh < NH; jh++) {
        let kh = th % SH + jh * SH;
        let ih = th / SH - jh;
        if (kh >= KH || ih < 0 || ih >= p.H) { continue; }
        for (var jw = 0; jw < NW; jw++) {
            let kw = tw % SW + jw * SW;
            let iw = tw / SW - jw;
            if (kw >= KW || iw < 0 || iw >= p.W) { continue; }
            var xi = xbase + ih * p.W + iw;
            var wi = wbase + kh * KW + kw;
            for (var c = 0; c < p.Cg; c++) {
                acc += x[xi] * w[wi];
                xi += hw;
                wi += wstep;
            }
        }
    }
    if (p.has_bias != 0) { acc += bias[m]; }
    y[i] = op_${act}(acc, p.act_a, p.act_b, 0.0);
}

// Max / average / Lp pooling over 2-D windows (a 1-D pool has H = 1), one output per
// invocation. mode 0: max, 1: average, 2: Lp norm with exponent lp.
struct Params {
    C: i32, H: i32, W: i32, n: i32,
    OH: i32, OW: i32, KH: i32, KW: i32,
    sh: i32, sw: i32, ph: i32, pw: i32,
    dh: i32, dw: i32, mode: i32, include_pad: i32,
    eh: i32, ew: i32, lp: f32, pad0: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

//!include common/math.wgsl

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let ow = i % p.OW;
    let oh = (i / p.OW) % p.OH;
    let plane = i / (p.OW * p.OH);
    let base = plane * p.H * p.W;
    let h0 = oh * p.sh - p.ph;
    let w0 = ow * p.sw - p.pw;
    let H = p.H;
    let W = p.W;
    let KH = p.KH;
    let KW = p.KW;
    let dh = p.dh;
    let dw = p.dw;
    let hlo = -p.ph;
    let hhi = p.H + p.eh;
    let wlo = -p.pw;
    let whi = p.W + p.ew;
    let lp_mode = p.mode == 2;
    let lp = p.lp;
    var best = bitcast<f32>(0xff800000u);
    var sum = 0.0;
    var count = 0;
    var padded = 0;
    for (var kh = 0; kh < KH; kh++) {
        let ih = h0 + kh * dh;
        for (var kw = 0; kw < KW; kw++) {
            let iw = w0 + kw * dw;
            if (ih >= hlo && ih < hhi && iw >= wlo && iw < whi) {
                padded++;
            }
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) { continue; }
            let v = x[base + ih * W + iw];
            best = max_f(best, v);  // a window holding a NaN gives NaN
            if (lp_mode) {
                sum += pow(abs(v), lp);
            } else {
                sum += v;
            }
            count++;
        }
    }
    var out = best;
    if (p.mode == 1) {
        out = sum / f32(max(select(count, padded, p.include_pad != 0), 1));
    } else if (p.mode == 2) {
        out = pow(sum, 1.0 / p.lp);
    }
    y[i] = out;
}

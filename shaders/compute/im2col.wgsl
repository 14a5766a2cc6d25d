// im2col for one image and one channel group: col[k][q] = x[c][ih][iw] (0 in the padding) for
// tap k = (c, kh, kw) and output pixel p0 + q. The convolution then is one matmul; on CPU
// adapters that beats the implicit GEMM, whose inner loop pays a bounds check per tap.
struct Params {
    n: i32, cols: i32, p0: i32, xbase: i32,
    H: i32, W: i32, OW: i32, KH: i32,
    KW: i32, sh: i32, sw: i32, ph: i32,
    pw: i32, dh: i32, dw: i32, pad0: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> col: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let q = i % p.cols;
    let k = i / p.cols;
    let pix = p.p0 + q;
    let oh = pix / p.OW;
    let ow = pix % p.OW;
    let kw = k % p.KW;
    let kh = (k / p.KW) % p.KH;
    let c = k / (p.KW * p.KH);
    let ih = oh * p.sh - p.ph + kh * p.dh;
    let iw = ow * p.sw - p.pw + kw * p.dw;
    let inside = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
    let src = p.xbase + (c * p.H + clamp(ih, 0, p.H - 1)) * p.W + clamp(iw, 0, p.W - 1);
    col[i] = select(0.0, x[src], inside);
}

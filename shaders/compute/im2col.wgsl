// im2col for one image and one channel group: col[k][q] = x[c][ih][iw] (0 in the padding) for
// tap k = (c, kh, kw) and output pixel p0 + q; the convolution then is one matmul. Each
// invocation fills a run of up to 64 pixels of one tap, stepping (oh, ow) incrementally: CPU
// adapters cannot vectorise integer division, which per element dominated the time.
// ld: col's row stride (cols rounded up to 4, so that the matmul loads rows as vec4s)
struct Params {
    n: i32, cols: i32, p0: i32, xbase: i32,
    H: i32, W: i32, OW: i32, KH: i32,
    KW: i32, sh: i32, sw: i32, ph: i32,
    pw: i32, dh: i32, dw: i32, chunks: i32,
    ld: i32, pad0: i32, pad1: i32, pad2: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> col: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let t = i32(g.x + g.y * nw.x * 64u);
    if (t >= p.n) { return; }
    let k = t / p.chunks;
    let first = (t % p.chunks) * 64;
    let last = min(first + 64, p.cols);
    let kw = k % p.KW;
    let kh = (k / p.KW) % p.KH;
    let c = k / (p.KW * p.KH);
    let H = p.H;
    let W = p.W;
    let OW = p.OW;
    let sw = p.sw;
    let cbase = p.xbase + c * H * W;
    let dy = kh * p.dh - p.ph;
    let dx = kw * p.dw - p.pw;
    let pix = p.p0 + first;
    var oh = pix / OW;
    var ow = pix % OW;
    var ih = oh * p.sh + dy;
    let sh = p.sh;
    for (var q = first; q < last; q++) {
        let iw = ow * sw + dx;
        let inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
        col[k * p.ld + q] = select(0.0, x[cbase + clamp(ih, 0, H - 1) * W + clamp(iw, 0, W - 1)],
                                     inside);
        ow++;
        if (ow == OW) {
            ow = 0;
            oh++;
            ih += sh;
        }
    }
}

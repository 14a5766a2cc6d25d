// im2col for one image and one channel group: col[k][q] = x[c][ih][iw] (0 in the padding) for
// tap k = (c, kh, kw) and output pixel p0 + q; the convolution then is one matmul. Each
// invocation fills a run of up to 64 pixels of one tap, stepping (oh, ow) incrementally: CPU
// adapters cannot vectorise integer division, which per element dominated the time. Stores
// are vec4s (a quarter of the store instructions).
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
@group(0) @binding(2) var<storage, read_write> col: array<vec4<f32>>;

// the next input of the run (0 in the padding), stepping (oh, ow) along the output rows
struct Walk { ow: i32, oh: i32, ih: i32 }

fn take(w: ptr<function, Walk>, cbase: i32, dx: i32) -> f32 {
    let H = p.H;
    let W = p.W;
    let iw = (*w).ow * p.sw + dx;
    let ih = (*w).ih;
    let inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
    let v = select(0.0, x[cbase + clamp(ih, 0, H - 1) * W + clamp(iw, 0, W - 1)], inside);
    (*w).ow++;
    if ((*w).ow == p.OW) {
        (*w).ow = 0;
        (*w).oh++;
        (*w).ih += p.sh;
    }
    return v;
}

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
    let cbase = p.xbase + c * p.H * p.W;
    let dy = kh * p.dh - p.ph;
    let dx = kw * p.dw - p.pw;
    let pix = p.p0 + first;
    var w = Walk(pix % p.OW, pix / p.OW, (pix / p.OW) * p.sh + dy);
    // 4 columns per store: rows of col are padded to 4 (ld), and the columns past `cols`
    // that the last store fills are never read
    let row = (k * p.ld) / 4;
    for (var q = first; q < last; q += 4) {
        let v0 = take(&w, cbase, dx);
        let v1 = take(&w, cbase, dx);
        let v2 = take(&w, cbase, dx);
        let v3 = take(&w, cbase, dx);
        col[row + q / 4] = vec4<f32>(v0, v1, v2, v3);
    }
}

// 2-D convolution (1-D as H = 1) with known weights, any group size (MASKED false: group 1
// or groups aligned to 4 channels).
// A fragment computes 4 output channels of P (1, 2, 4 or 8) pixels of one output row:
// columns x + j * Q for j < P, written to colour target j (target 0 is the output, the others
// are copied into its columns j * Q.. after the pass), so each weight texel it loads serves P
// pixels. Kernel size, strides and dilations are fixed at specialisation (loops unroll,
// addresses fold); PAD false: no pads, every tap of a real output pixel is inside the input,
// no bounds checks.
// Fused activation ${ACT} (act4) with f[7].
// X [N, C, H, W]; the fragment reads CBG input blocks from the one holding the first channel
// of output channel 4 mb's group; Wt: tap-major weights, texel (((ky * KW + kx) * CBG + cb)
// * 4 + j, mb) = W[4 mb + j, channels of block cb, ky, kx] (zero past M and outside the
// group), so the inner loop reads 4 consecutive texels of one row; B [M]. MASKED: the
// blocks hold channels of other groups, whose lanes are zeroed per output channel (a NaN
// there must not reach it; zero weights alone would let it).
// i[0] = (N, C, H, W)   i[1] = (M, OH, OW, input blocks)   i[2] = (pad_top, pad_left, Q,
// channels per group)   i[3] = (output blocks, CBG, output channels per group, has bias)
// DEPTHWISE (one input and one output channel per group): Wt is [kh * kw, M / 4] texels,
// texel (tap, mb) = the weights of channels 4 mb..4 mb + 3, and a load serves 4 channels.

//!include pixel/act4.wgsl
//!include pixel/conv_out${P}.wgsl

const KH: u32 = ${KH}u;
const KW: u32 = ${KW}u;
const SH: i32 = ${SH};
const SW: i32 = ${SW};
const DH: i32 = ${DH};
const DW: i32 = ${DW};
const PAD: bool = ${PAD};
const P: i32 = ${P};
const MASKED: bool = ${MASKED};
const DEPTHWISE: bool = ${DEPTHWISE};

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var Wt: texture_2d<f32>;
@group(0) @binding(3) var Bt: texture_2d<f32>;

// input texel at column ix of row xr, zero outside the input (PAD)
fn xat(ix: i32, xr: u32, wd: i32) -> vec4<f32> {
    if (!PAD) {
        return ld(X, u32(ix), xr);
    }
    let v = ld(X, u32(clamp(ix, 0, wd - 1)), xr);
    return select(vec4<f32>(0.0), v, vec4<bool>(ix >= 0 && ix < wd));
}

fn mul4(x: vec4<f32>, w0: vec4<f32>, w1: vec4<f32>, w2: vec4<f32>, w3: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(x, w0), dot(x, w1), dot(x, w2), dot(x, w3));
}

// mul4 with lanes outside each output channel's group zeroed (MASKED)
fn mul4k(x: vec4<f32>, w0: vec4<f32>, w1: vec4<f32>, w2: vec4<f32>, w3: vec4<f32>,
         k: array<vec4<bool>, 4>) -> vec4<f32> {
    if (!MASKED) {
        return mul4(x, w0, w1, w2, w3);
    }
    let z = vec4<f32>(0.0);
    return vec4<f32>(dot(select(z, x, k[0]), w0), dot(select(z, x, k[1]), w1),
                     dot(select(z, x, k[2]), w2), dot(select(z, x, k[3]), w3));
}

fn finish(acc: vec4<f32>, mb: u32) -> vec4<f32> {
    var a = acc;
    if (U.i[3].w != 0) {
        a += ld(Bt, mb, 0u);
    }
    a = act4(a, U.f[7]);
    let left = U.i[1].x - i32(mb * 4u);
    return select(vec4<f32>(0.0), a, vec4<i32>(0, 1, 2, 3) < vec4<i32>(left));
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> Out {
    let p = vec2<u32>(pos.xy);
    let H = U.i[0].z;
    let Wd = U.i[0].w;
    let oh_n = u32(U.i[1].y);
    let mbs = u32(U.i[3].x);
    let cbg = u32(U.i[3].y);
    let step = U.i[2].z * SW;  // input columns between the fragment's pixels
    let oh = i32(p.y % oh_n);
    let t = p.y / oh_n;
    let mb = t % mbs;
    let n = t / mbs;
    let mg = u32(U.i[3].z);
    let cg = u32(U.i[2].w);
    let cb0 = (mb * 4u) / mg * cg / 4u;
    let xbase = (n * u32(U.i[1].w) + cb0) * u32(H);
    // first input channel of each output channel's group (MASKED)
    let mlast = u32(U.i[1].x) - 1u;
    let g0 = vec4<i32>(vec4<u32>(mb * 4u) + vec4<u32>(0u, 1u, 2u, 3u));
    let c0 = (min(g0, vec4<i32>(i32(mlast))) / i32(mg)) * i32(cg);
    let iy0 = oh * SH - U.i[2].x;
    let ix0 = i32(p.x) * SW - U.i[2].y;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var a4 = vec4<f32>(0.0);
    var a5 = vec4<f32>(0.0);
    var a6 = vec4<f32>(0.0);
    var a7 = vec4<f32>(0.0);
    for (var ky = 0u; ky < KH; ky++) {
        let iy = iy0 + i32(ky) * DH;
        if (PAD && (iy < 0 || iy >= H)) {
            continue;
        }
        for (var kx = 0u; kx < KW; kx++) {
            let ix = ix0 + i32(kx) * DW;
            var xr = xbase + u32(iy);
            var wx = (ky * KW + kx) * cbg * 4u;
            if (DEPTHWISE) {
                // one channel per group: texel (tap, mb) holds the 4 channels' weights
                let wv = ld(Wt, ky * KW + kx, mb);
                a0 += xat(ix, xr, Wd) * wv;
                if (P > 1) {
                    a1 += xat(ix + step, xr, Wd) * wv;
                }
                if (P > 2) {
                    a2 += xat(ix + 2 * step, xr, Wd) * wv;
                    a3 += xat(ix + 3 * step, xr, Wd) * wv;
                }
                if (P > 4) {
                    a4 += xat(ix + 4 * step, xr, Wd) * wv;
                    a5 += xat(ix + 5 * step, xr, Wd) * wv;
                    a6 += xat(ix + 6 * step, xr, Wd) * wv;
                    a7 += xat(ix + 7 * step, xr, Wd) * wv;
                }
                continue;
            }
            for (var cb = 0u; cb < cbg; cb++) {
                var k: array<vec4<bool>, 4>;
                if (MASKED) {
                    let ch = vec4<i32>(0, 1, 2, 3) + vec4<i32>(i32((cb0 + cb) * 4u));
                    for (var j = 0; j < 4; j++) {
                        k[j] = ch >= vec4<i32>(c0[j]) & ch < vec4<i32>(c0[j] + i32(cg));
                    }
                    xr = xbase + min(cb, u32(U.i[1].w) - 1u - cb0) * u32(H) + u32(iy);
                }
                let w0 = ld(Wt, wx, mb);
                let w1 = ld(Wt, wx + 1u, mb);
                let w2 = ld(Wt, wx + 2u, mb);
                let w3 = ld(Wt, wx + 3u, mb);
                a0 += mul4k(xat(ix, xr, Wd), w0, w1, w2, w3, k);
                if (P > 1) {
                    a1 += mul4k(xat(ix + step, xr, Wd), w0, w1, w2, w3, k);
                }
                if (P > 2) {
                    a2 += mul4k(xat(ix + 2 * step, xr, Wd), w0, w1, w2, w3, k);
                    a3 += mul4k(xat(ix + 3 * step, xr, Wd), w0, w1, w2, w3, k);
                }
                if (P > 4) {
                    a4 += mul4k(xat(ix + 4 * step, xr, Wd), w0, w1, w2, w3, k);
                    a5 += mul4k(xat(ix + 5 * step, xr, Wd), w0, w1, w2, w3, k);
                    a6 += mul4k(xat(ix + 6 * step, xr, Wd), w0, w1, w2, w3, k);
                    a7 += mul4k(xat(ix + 7 * step, xr, Wd), w0, w1, w2, w3, k);
                }
                xr += u32(H);
                wx += 4u;
            }
        }
    }
    return outputs(array<vec4<f32>, 8>(finish(a0, mb), finish(a1, mb), finish(a2, mb),
                   finish(a3, mb), finish(a4, mb), finish(a5, mb), finish(a6, mb),
                   finish(a7, mb)));
}

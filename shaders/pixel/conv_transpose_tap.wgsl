// ConvTranspose (1-D as H = 1), group 1, dilation 1, weights known, as a gather: output
// (oh, ow) takes input (iy, ix) through tap (ky, kx) where oh = iy * SH - pad_top + ky, so its
// taps are ky = (oh + pad_top) mod SH, then every SH-th (likewise along x). A fragment
// computes 4 output channels of P pixels of a row, columns x + j * Q with Q a multiple of SW:
// they share their taps and so each weight texel loaded. Colour target j holds pixel j (see
// conv_tap.wgsl). Kernel size and strides fixed at specialisation; fused activation ${ACT}
// (act4) with f[7].
// X [N, C, H, W]; Wt: tap-major weights, texel (((ky * KW + kx) * CB + cb) * 4 + j, mb) =
// W[4 cb..4 cb + 3, 4 mb + j, ky, kx] (zero past C and M); B [M].
// i[0] = (N, C, H, W)   i[1] = (M, OH, OW, input blocks)   i[2] = (pad_top, pad_left, Q)
// i[3] = (output blocks, 0, 0, has bias)

//!include pixel/act4.wgsl
//!include pixel/conv_out${P}.wgsl

const KH: i32 = ${KH};
const KW: i32 = ${KW};
const SH: i32 = ${SH};
const SW: i32 = ${SW};
const P: i32 = ${P};

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var Wt: texture_2d<f32>;
@group(0) @binding(3) var Bt: texture_2d<f32>;

// input texel at column ix of row xr, zero outside the input
fn xat(ix: i32, xr: u32, wd: i32) -> vec4<f32> {
    let v = ld(X, u32(clamp(ix, 0, wd - 1)), xr);
    return select(vec4<f32>(0.0), v, vec4<bool>(ix >= 0 && ix < wd));
}

fn mul4(x: vec4<f32>, w0: vec4<f32>, w1: vec4<f32>, w2: vec4<f32>, w3: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(x, w0), dot(x, w1), dot(x, w2), dot(x, w3));
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

// first tap index k < step with (t - k) divisible by step
fn first_tap(t: i32, step: i32) -> i32 {
    return ((t % step) + step) % step;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> Out {
    let p = vec2<u32>(pos.xy);
    let H = U.i[0].z;
    let Wd = U.i[0].w;
    let oh_n = u32(U.i[1].y);
    let mbs = u32(U.i[3].x);
    let cbs = u32(U.i[1].w);
    let qs = U.i[2].z / SW;  // input columns between the fragment's pixels
    let oh = i32(p.y % oh_n);
    let t = p.y / oh_n;
    let mb = t % mbs;
    let n = t / mbs;
    let ty = oh + U.i[2].x;
    let tx = i32(p.x) + U.i[2].y;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    for (var ky = first_tap(ty, SH); ky < KH; ky += SH) {
        let iy = (ty - ky) / SH;
        if (iy < 0 || iy >= H) {
            continue;
        }
        for (var kx = first_tap(tx, SW); kx < KW; kx += SW) {
            let ix = (tx - kx) / SW;
            var xr = n * cbs * u32(H) + u32(iy);
            var wx = u32(ky * KW + kx) * cbs * 4u;
            for (var cb = 0u; cb < cbs; cb++) {
                let w0 = ld(Wt, wx, mb);
                let w1 = ld(Wt, wx + 1u, mb);
                let w2 = ld(Wt, wx + 2u, mb);
                let w3 = ld(Wt, wx + 3u, mb);
                a0 += mul4(xat(ix, xr, Wd), w0, w1, w2, w3);
                if (P > 1) {
                    a1 += mul4(xat(ix + qs, xr, Wd), w0, w1, w2, w3);
                }
                if (P > 2) {
                    a2 += mul4(xat(ix + 2 * qs, xr, Wd), w0, w1, w2, w3);
                    a3 += mul4(xat(ix + 3 * qs, xr, Wd), w0, w1, w2, w3);
                }
                xr += u32(H);
                wx += 4u;
            }
        }
    }
    let z = vec4<f32>(0.0);
    return outputs(array<vec4<f32>, 8>(finish(a0, mb), finish(a1, mb), finish(a2, mb),
                   finish(a3, mb), z, z, z, z));
}

// 2-D convolution (1-D as H = 1), one output texel = 4 output channels of one pixel.
// X [N, C, H, W], W [M, C/group, kh, kw], B [M]; fused activation ${ACT} (act4) with f[7].
// i[0] = (N, C, H, W)        i[1] = (M, OH, OW, group)   i[2] = (kh, kw, sh, sw)
// i[3] = (pad_top, pad_left, dh, dw)   i[4] = (C blocks, M blocks, C/group, M/group)
// i[5] = (has bias, texel blocks of W's axis 1, 0, 0)
// Variant ${VARIANT}: blocked (group 1 or groups aligned to 4 channels), depthwise, grouped
// (other groups, weights known: W is a matrix on the input's channel blocks), scalar,
// transposed (ConvTranspose, group 1, weights known).

//!include pixel/act4.wgsl

// WMAT: the weights are a [M rows, (C/group blocks * kh * kw) texels] matrix texture (the
// same texel order as the tensor layout, wrapped per output channel so large 1x1 and 3x3
// weights fit the texture limit; depthwise: [M / 4 rows, kh * kw texels], 4 channels per
// texel); else the tensor layout of W.
const WMAT: bool = ${WMAT};

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var Wt: texture_2d<f32>;
@group(0) @binding(3) var Bt: texture_2d<f32>;

fn in_y(oh: u32, ky: u32) -> i32 {
    return i32(oh) * U.i[2].z - U.i[3].x + i32(ky) * U.i[3].z;
}

fn in_x(ow: u32, kx: u32) -> i32 {
    return i32(ow) * U.i[2].w - U.i[3].y + i32(kx) * U.i[3].w;
}

// W[m, 4cb..4cb+3, ky, kx]
fn wload(m: u32, cb: u32, ky: u32, kx: u32) -> vec4<f32> {
    let kh = u32(U.i[2].x);
    if (WMAT) {
        return ld(Wt, (cb * kh + ky) * u32(U.i[2].y) + kx, m);
    }
    return ld(Wt, kx, (m * u32(U.i[5].y) + cb) * kh + ky);
}

fn conv_blocked(n: u32, mb: u32, oh: u32, ow: u32) -> vec4<f32> {
    let H = i32(U.i[0].z);
    let Wd = i32(U.i[0].w);
    let kh = u32(U.i[2].x);
    let kw = u32(U.i[2].y);
    let cbs = u32(U.i[4].x);
    let mlast = u32(U.i[1].x) - 1u;
    let m0 = mb * 4u;
    let g = m0 / u32(U.i[4].w);
    let cb0 = g * u32(U.i[4].z) / 4u;
    let wcb = u32(U.i[5].y);
    let m1 = min(m0 + 1u, mlast);
    let m2 = min(m0 + 2u, mlast);
    let m3 = min(m0 + 3u, mlast);
    var acc = vec4<f32>(0.0);
    for (var cb = 0u; cb < wcb; cb++) {
        let xrow = (n * cbs + cb0 + cb) * u32(H);
        for (var ky = 0u; ky < kh; ky++) {
            let iy = in_y(oh, ky);
            if (iy < 0 || iy >= H) {
                continue;
            }
            for (var kx = 0u; kx < kw; kx++) {
                let ix = in_x(ow, kx);
                if (ix < 0 || ix >= Wd) {
                    continue;
                }
                let xv = ld(X, u32(ix), xrow + u32(iy));
                acc += vec4<f32>(dot(xv, wload(m0, cb, ky, kx)), dot(xv, wload(m1, cb, ky, kx)),
                                 dot(xv, wload(m2, cb, ky, kx)), dot(xv, wload(m3, cb, ky, kx)));
            }
        }
    }
    return acc;
}

fn conv_depthwise(n: u32, mb: u32, oh: u32, ow: u32) -> vec4<f32> {
    let H = i32(U.i[0].z);
    let Wd = i32(U.i[0].w);
    let kh = u32(U.i[2].x);
    let kw = u32(U.i[2].y);
    let mlast = u32(U.i[1].x) - 1u;
    let m0 = mb * 4u;
    let xrow = (n * u32(U.i[4].x) + mb) * u32(H);
    let m1 = min(m0 + 1u, mlast);
    let m2 = min(m0 + 2u, mlast);
    let m3 = min(m0 + 3u, mlast);
    var acc = vec4<f32>(0.0);
    for (var ky = 0u; ky < kh; ky++) {
        let iy = in_y(oh, ky);
        if (iy < 0 || iy >= H) {
            continue;
        }
        for (var kx = 0u; kx < kw; kx++) {
            let ix = in_x(ow, kx);
            if (ix < 0 || ix >= Wd) {
                continue;
            }
            let xv = ld(X, u32(ix), xrow + u32(iy));
            if (WMAT) {
                // CPU-known weights: texel (tap, mb) holds the 4 channels' weights
                acc += xv * ld(Wt, ky * kw + kx, mb);
            } else {
                let wv = vec4<f32>(wload(m0, 0u, ky, kx).x, wload(m1, 0u, ky, kx).x,
                                   wload(m2, 0u, ky, kx).x, wload(m3, 0u, ky, kx).x);
                acc += xv * wv;
            }
        }
    }
    return acc;
}

fn conv_scalar(n: u32, mb: u32, oh: u32, ow: u32) -> vec4<f32> {
    let H = i32(U.i[0].z);
    let Wd = i32(U.i[0].w);
    let kh = u32(U.i[2].x);
    let kw = u32(U.i[2].y);
    let cbs = u32(U.i[4].x);
    let cg = u32(U.i[4].z);
    let mg = u32(U.i[4].w);
    let wcb = u32(U.i[5].y);
    let mlast = u32(U.i[1].x) - 1u;
    var acc = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        let m = min(mb * 4u + j, mlast);
        let g = m / mg;
        var s = 0.0;
        for (var ic = 0u; ic < cg; ic++) {
            let c = g * cg + ic;
            let xrow = (n * cbs + c / 4u) * u32(H);
            for (var ky = 0u; ky < kh; ky++) {
                let iy = in_y(oh, ky);
                if (iy < 0 || iy >= H) {
                    continue;
                }
                for (var kx = 0u; kx < kw; kx++) {
                    let ix = in_x(ow, kx);
                    if (ix < 0 || ix >= Wd) {
                        continue;
                    }
                    s += ld(X, u32(ix), xrow + u32(iy))[c % 4u] * wload(m, ic / 4u, ky, kx)[ic % 4u];
                }
            }
        }
        acc[j] = s;
    }
    return acc;
}

// ConvTranspose as a gather (group 1, weights known): output (oh, ow) takes input (iy, ix)
// through tap (ky, kx) where oh = iy * sh - pad_top + ky * dh; W is [M rows, (C blocks * kh *
// kw) texels] of the transposed weights W[c, m, ky, kx] (i[2..3] as for Conv).
fn conv_transposed(n: u32, mb: u32, oh: u32, ow: u32) -> vec4<f32> {
    let H = i32(U.i[0].z);
    let Wd = i32(U.i[0].w);
    let kh = u32(U.i[2].x);
    let kw = u32(U.i[2].y);
    let cbs = u32(U.i[4].x);
    let mlast = u32(U.i[1].x) - 1u;
    let m0 = mb * 4u;
    let m1 = min(m0 + 1u, mlast);
    let m2 = min(m0 + 2u, mlast);
    let m3 = min(m0 + 3u, mlast);
    var acc = vec4<f32>(0.0);
    for (var ky = 0u; ky < kh; ky++) {
        let ty = i32(oh) + U.i[3].x - i32(ky) * U.i[3].z;
        let iy = ty / U.i[2].z;
        if (ty < 0 || iy * U.i[2].z != ty || iy >= H) {
            continue;
        }
        for (var kx = 0u; kx < kw; kx++) {
            let tx = i32(ow) + U.i[3].y - i32(kx) * U.i[3].w;
            let ix = tx / U.i[2].w;
            if (tx < 0 || ix * U.i[2].w != tx || ix >= Wd) {
                continue;
            }
            for (var cb = 0u; cb < cbs; cb++) {
                let xv = ld(X, u32(ix), (n * cbs + cb) * u32(H) + u32(iy));
                acc += vec4<f32>(dot(xv, wload(m0, cb, ky, kx)), dot(xv, wload(m1, cb, ky, kx)),
                                 dot(xv, wload(m2, cb, ky, kx)), dot(xv, wload(m3, cb, ky, kx)));
            }
        }
    }
    return acc;
}

// Groups not aligned to 4 channels: output channel m reads the input texels spanning its
// group, whole texels at a time, with lanes of other groups masked to 0 (a NaN there must not
// reach m); row m of the weight matrix is laid on the same blocks, zero outside the group.
fn conv_grouped(n: u32, mb: u32, oh: u32, ow: u32) -> vec4<f32> {
    let H = i32(U.i[0].z);
    let Wd = i32(U.i[0].w);
    let kh = u32(U.i[2].x);
    let kw = u32(U.i[2].y);
    let cbs = u32(U.i[4].x);
    let cg = u32(U.i[4].z);
    let mg = u32(U.i[4].w);
    let blocks = u32(U.i[5].y);
    let mlast = u32(U.i[1].x) - 1u;
    var acc = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        let m = min(mb * 4u + j, mlast);
        let c0 = (m / mg) * cg;
        let b0 = c0 / 4u;
        let nb = min(blocks, cbs - b0);
        var s = 0.0;
        for (var b = 0u; b < nb; b++) {
            let lane = vec4<u32>(0u, 1u, 2u, 3u) + vec4<u32>((b0 + b) * 4u);
            let keep = (lane >= vec4<u32>(c0)) & (lane < vec4<u32>(c0 + cg));
            let xrow = (n * cbs + b0 + b) * u32(H);
            for (var ky = 0u; ky < kh; ky++) {
                let iy = in_y(oh, ky);
                if (iy < 0 || iy >= H) {
                    continue;
                }
                for (var kx = 0u; kx < kw; kx++) {
                    let ix = in_x(ow, kx);
                    if (ix < 0 || ix >= Wd) {
                        continue;
                    }
                    let xv = select(vec4<f32>(0.0), ld(X, u32(ix), xrow + u32(iy)), keep);
                    s += dot(xv, wload(m, b, ky, kx));
                }
            }
        }
        acc[j] = s;
    }
    return acc;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let oh_n = u32(U.i[1].y);
    let mbs = u32(U.i[4].y);
    let ow = p.x;
    let oh = p.y % oh_n;
    let t = p.y / oh_n;
    let mb = t % mbs;
    let n = t / mbs;
    var acc = conv_${VARIANT}(n, mb, oh, ow);
    if (${BIAS}) {
        acc += ld(Bt, mb, 0u);
    }
    acc = act4(acc, U.f[7]);
    let left = U.i[1].x - i32(mb * 4u);
    return select(vec4<f32>(0.0), acc, vec4<i32>(0, 1, 2, 3) < vec4<i32>(left));
}

// 2-D convolution (1-D as H = 1) of groups aligned to 4 channels (or group 1), weights known,
// one output texel = 4 output channels of one pixel. Kernel size, strides and dilations are
// fixed at specialisation (loops unroll, addresses fold); PAD false: no pads, every tap is
// inside the input, so there are no bounds checks. Fused activation ${ACT} (act4) with f[7].
// X [N, C, H, W]; Wt: tap-major weights, texel (((ky * KW + kx) * CBG + cb) * 4 + j, mb) =
// W[4 mb + j, 4 cb..4 cb + 3, ky, kx] (zero past M and past C / group), so the inner loop
// over the group's input blocks reads 4 consecutive texels of one row; B [M].
// i[0] = (N, C, H, W)   i[1] = (M, OH, OW, input blocks)   i[2] = (pad_top, pad_left)
// i[3] = (output blocks, input blocks per group (CBG), output channels per group, has bias)

//!include pixel/act4.wgsl

const KH: u32 = ${KH}u;
const KW: u32 = ${KW}u;
const SH: i32 = ${SH};
const SW: i32 = ${SW};
const DH: i32 = ${DH};
const DW: i32 = ${DW};
const PAD: bool = ${PAD};

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var Wt: texture_2d<f32>;
@group(0) @binding(3) var Bt: texture_2d<f32>;

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let H = U.i[0].z;
    let Wd = U.i[0].w;
    let oh_n = u32(U.i[1].y);
    let mbs = u32(U.i[3].x);
    let cbg = u32(U.i[3].y);
    let ow = i32(p.x);
    let oh = i32(p.y % oh_n);
    let t = p.y / oh_n;
    let mb = t % mbs;
    let n = t / mbs;
    let cb0 = (mb * 4u) / u32(U.i[3].z) * cbg;
    let xbase = (n * u32(U.i[1].w) + cb0) * u32(H);
    let iy0 = oh * SH - U.i[2].x;
    let ix0 = ow * SW - U.i[2].y;
    var acc = vec4<f32>(0.0);
    for (var ky = 0u; ky < KH; ky++) {
        let iy = iy0 + i32(ky) * DH;
        if (PAD && (iy < 0 || iy >= H)) {
            continue;
        }
        for (var kx = 0u; kx < KW; kx++) {
            let ix = ix0 + i32(kx) * DW;
            if (PAD && (ix < 0 || ix >= Wd)) {
                continue;
            }
            var xr = xbase + u32(iy);
            var wx = (ky * KW + kx) * cbg * 4u;
            for (var cb = 0u; cb < cbg; cb++) {
                let xv = ld(X, u32(ix), xr);
                acc += vec4<f32>(dot(xv, ld(Wt, wx, mb)), dot(xv, ld(Wt, wx + 1u, mb)),
                                 dot(xv, ld(Wt, wx + 2u, mb)), dot(xv, ld(Wt, wx + 3u, mb)));
                xr += u32(H);
                wx += 4u;
            }
        }
    }
    if (U.i[3].w != 0) {
        acc += ld(Bt, mb, 0u);
    }
    acc = act4(acc, U.f[7]);
    let left = U.i[1].x - i32(mb * 4u);
    return select(vec4<f32>(0.0), acc, vec4<i32>(0, 1, 2, 3) < vec4<i32>(left));
}

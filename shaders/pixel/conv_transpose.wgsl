// ConvTranspose, 1-D or 2-D (a 1-D one has H = 1), one output element per component, as a
// gather: output position o receives input position i through kernel tap k when
// o = i * stride - pad + k * dilation. X = t0 [N, C, (H,) W], W = t1 [C, Cout / group,
// (kH,) kW], B = t2 [Cout] (when i[2].z != 0); the fused activation ${ACT} (act4) has f[0].
// i[0] = (kH, kW, group, 1 for 2-D), i[1] = (stride h, stride w, dilation h, dilation w),
// i[2] = (pad h, pad w, has bias, 0)

//!include pixel/act4.wgsl

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var W: texture_2d<f32>;
@group(0) @binding(3) var B: texture_2d<f32>;

fn convt_elem(e: array<u32, 6>) -> f32 {
    let two = U.i[0].w != 0;
    let base = select(3u, 2u, two);  // padded axis of N
    let n = e[base];
    let oc = i32(e[base + 1u]);
    let oh = select(0, i32(e[4]), two);
    let ow = i32(e[5]);
    let xd = dims6(U.t[0]);
    let wd = dims6(U.t[1]);
    let cin = i32(xd[base + 1u]);
    let H = select(1, i32(xd[4]), two);
    let Wd = i32(xd[5]);
    let group = U.i[0].z;
    let cpg = cin / group;
    let opg = i32(wd[base + 1u]);
    let g = oc / opg;
    let kh_n = U.i[0].x;
    let kw_n = U.i[0].y;
    var xe: array<u32, 6>;
    var we: array<u32, 6>;
    xe[base] = n;
    we[base + 1u] = u32(oc % opg);
    var s = 0.0;
    for (var ci = g * cpg; ci < (g + 1) * cpg; ci++) {
        xe[base + 1u] = u32(ci);
        we[base] = u32(ci);
        for (var kh = 0; kh < kh_n; kh++) {
            let th = oh + U.i[2].x - kh * U.i[1].z;
            if (th < 0 || th % U.i[1].x != 0 || th / U.i[1].x >= H) { continue; }
            for (var kw = 0; kw < kw_n; kw++) {
                let tw = ow + U.i[2].y - kw * U.i[1].w;
                if (tw < 0 || tw % U.i[1].y != 0 || tw / U.i[1].y >= Wd) { continue; }
                if (two) {
                    xe[4] = u32(th / U.i[1].x);
                    we[4] = u32(kh);
                }
                xe[5] = u32(tw / U.i[1].y);
                we[5] = u32(kw);
                s += load_elem(X, U.t[0], xe) * load_elem(W, U.t[1], we);
            }
        }
    }
    if (U.i[2].z != 0) {
        var be: array<u32, 6>;
        be[5] = u32(oc);
        s += load_elem(B, U.t[2], be);
    }
    return act4(vec4<f32>(s), U.f[0]).x;
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return convt_elem(e);
}

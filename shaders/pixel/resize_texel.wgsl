// Resize along one axis that is not the blocked one, by a tap table T [out, 2 * taps + 1] as
// in resize.wgsl: all 4 components of a texel share their source index, so each tap is one
// whole-texel load. ALONG_X: the axis runs along x; else its steps are i[0].x texture rows
// apart. i[0] = (rows per step of the axis, taps, output extent, input extent)

const ALONG_X: bool = ${ALONG_X};

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var Tb: texture_2d<f32>;

fn tap(o: u32, col: u32) -> f32 {
    return ld(Tb, col / 4u, o)[col % 4u];
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let rs = u32(U.i[0].x);
    let taps = u32(U.i[0].y);
    let n_out = u32(U.i[0].z);
    var o = p.x;
    var base = p.y;
    if (!ALONG_X) {
        o = (p.y / rs) % n_out;
        base = (p.y / (rs * n_out)) * (rs * u32(U.i[0].w)) + p.y % rs;
    }
    var s = vec4<f32>(tap(o, 2u * taps));
    for (var t = 0u; t < taps; t++) {
        let w = tap(o, taps + t);
        if (w != 0.0) {
            let i = u32(tap(o, t));
            if (ALONG_X) {
                s += w * ld(X, i, base);
            } else {
                s += w * ld(X, p.x, base + i * rs);
            }
        }
    }
    return select(vec4<f32>(0.0), s, mask_at(U.o, p));
}

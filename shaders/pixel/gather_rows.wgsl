// Gather of whole rows of a [V, D] table (axis 0: embedding lookups) by 1-D or 2-D indices,
// without gather.wgsl's per-element index mapping (private arrays and a loop over six axes
// for each of a texel's four values: an embedding lookup of 128 tokens took ~3 ms on
// lavapipe). The table's texels hold 4 values along D; the index texture is the usual
// float32 one (whole numbers; negative ones count from the end, out-of-range ones clamp).
// i[0] = (V, L = the indices' last axis, the output's rank (2 or 3), 0)
// Output [L, D] (1-D indices): its texel (x, l) is the table's texel (x, row of index l).
// Output [B, L, D]: blocked along L, so texel (d, b * ceil(L / 4) + lb) holds tokens
// 4 lb .. 4 lb + 3 at column d, whose indices are one texel of the [B, L] index texture.

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var I: texture_2d<f32>;

fn row_of(v: f32) -> u32 {
    let V = U.i[0].x;
    var r = i32(round(v));
    r = select(r, r + V, r < 0);
    return u32(clamp(r, 0, V - 1));
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let L = u32(U.i[0].y);
    if (U.i[0].z == 2) {
        return ld(X, p.x, row_of(ld(I, p.y / 4u, 0u)[p.y % 4u]));
    }
    let L4 = (L + 3u) / 4u;
    let lb = p.y % L4;
    let ids = ld(I, lb, p.y / L4);
    let column = p.x / 4u;
    let part = p.x % 4u;
    var r = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (lb * 4u + c < L) {
            r[c] = ld(X, column, row_of(ids[c]))[part];
        }
    }
    return r;
}

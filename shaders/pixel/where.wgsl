// Where: out = C != 0 ? X : Y, all three broadcast to the output (numpy rules; shapes are
// right-aligned by the rank-6 padding, so a dim of 1 repeats).

@group(0) @binding(1) var C: texture_2d<f32>;
@group(0) @binding(2) var X: texture_2d<f32>;
@group(0) @binding(3) var Y: texture_2d<f32>;

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let b = texel_index(U.o, vec2<u32>(pos.xy));
    let mask = valid_mask(U.o, b);
    var r = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (mask[c]) {
            let e = elem_of(U.o, b, c);
            let pick = load_bcast(C, U.t[0], e) != 0.0;
            r[c] = select(load_bcast(Y, U.t[2], e), load_bcast(X, U.t[1], e), pick);
        }
    }
    return r;
}

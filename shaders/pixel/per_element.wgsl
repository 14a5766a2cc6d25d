// The fragment entry point of shaders that compute one output element per texel component:
// the including shader defines `fn element(e: array<u32, 6>) -> f32`, the value of output
// element e; padding components past the end of the blocked axis stay 0.

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let b = texel_index(U.o, vec2<u32>(pos.xy));
    let mask = valid_mask(U.o, b);
    var r = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (mask[c]) {
            r[c] = element(elem_of(U.o, b, c));
        }
    }
    return r;
}

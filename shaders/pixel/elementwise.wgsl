// Broadcasting elementwise ops: out = u_${UN}(fold of b_${BIN} over the inputs * f[0].x, f[1]).
// i[0].x = number of inputs (1..8); i[1], i[2] = per-input access: 0 = same layout as the
// output (one texel), 1 = numpy broadcasting (one gather per component).

@group(0) @binding(1) var t0: texture_2d<f32>;
@group(0) @binding(2) var t1: texture_2d<f32>;
@group(0) @binding(3) var t2: texture_2d<f32>;
@group(0) @binding(4) var t3: texture_2d<f32>;
@group(0) @binding(5) var t4: texture_2d<f32>;
@group(0) @binding(6) var t5: texture_2d<f32>;
@group(0) @binding(7) var t6: texture_2d<f32>;
@group(0) @binding(8) var t7: texture_2d<f32>;

fn access(k: u32) -> i32 {
    let v = select(U.i[2], U.i[1], k < 4u);
    return v[k % 4u];
}

fn fetch(tex: texture_2d<f32>, k: u32, p: vec2<u32>, b: array<u32, 6>) -> vec4<f32> {
    if (access(k) == 0) {
        return ld(tex, p.x, p.y);
    }
    return load_bcast4(tex, U.t[k], b);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let b = texel_index(U.o, p);
    let n = U.i[0].x;
    var v = fetch(t0, 0u, p, b);
    if (n > 1) { v = b_${BIN}(v, fetch(t1, 1u, p, b)); }
    if (n > 2) { v = b_${BIN}(v, fetch(t2, 2u, p, b)); }
    if (n > 3) { v = b_${BIN}(v, fetch(t3, 3u, p, b)); }
    if (n > 4) { v = b_${BIN}(v, fetch(t4, 4u, p, b)); }
    if (n > 5) { v = b_${BIN}(v, fetch(t5, 5u, p, b)); }
    if (n > 6) { v = b_${BIN}(v, fetch(t6, 6u, p, b)); }
    if (n > 7) { v = b_${BIN}(v, fetch(t7, 7u, p, b)); }
    return keep_valid(U.o, b, u_${UN}(v * U.f[0].x, U.f[1]));
}

// Softmax / LogSoftmax over one axis that does not run along x (the last axis uses
// rowstats/rownorm): its entries are texels of the same column a fixed number of rows apart,
// so each output texel reads the texels of its group whole, twice. Op ${OP}.
// i[0] = (texture rows per step of the axis, its extent in texels, its extent in elements)
// BLOCKED true: the axis is the blocked one (4 entries per texel, one group for all 4
// components, padding lanes excluded); false: each component is its own group.

const BLOCKED: bool = ${BLOCKED};

@group(0) @binding(1) var X: texture_2d<f32>;

// texel j of the group with lanes past the axis's end set to `fill` (BLOCKED)
fn at(x: u32, base: u32, j: u32, fill: f32) -> vec4<f32> {
    let v = ld(X, x, base + j * u32(U.i[0].x));
    if (!BLOCKED) {
        return v;
    }
    let valid = vec4<u32>(0u, 1u, 2u, 3u) + 4u * j < vec4<u32>(u32(U.i[0].z));
    return select(vec4<f32>(fill), v, valid);
}

fn finish_Softmax(x: vec4<f32>, m: vec4<f32>, s: vec4<f32>) -> vec4<f32> {
    return exp(x - m) / s;
}

fn finish_LogSoftmax(x: vec4<f32>, m: vec4<f32>, s: vec4<f32>) -> vec4<f32> {
    return x - m - log(s);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let rs = u32(U.i[0].x);
    let n = u32(U.i[0].y);
    let base = p.y - ((p.y / rs) % n) * rs;
    var m = vec4<f32>(-f_inf());
    for (var j = 0u; j < n; j++) {
        m = max(m, at(p.x, base, j, -f_inf()));
    }
    if (BLOCKED) {
        m = vec4<f32>(max(max(m.x, m.y), max(m.z, m.w)));
    }
    var s = vec4<f32>(0.0);
    for (var j = 0u; j < n; j++) {
        s += exp(at(p.x, base, j, -f_inf()) - m);
    }
    if (BLOCKED) {
        s = vec4<f32>(dot(s, vec4<f32>(1.0)));
    }
    let r = finish_${OP}(ld(X, p.x, p.y), m, s);
    return select(vec4<f32>(0.0), r, mask_at(U.o, p));
}

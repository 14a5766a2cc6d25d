// Normalisations over channels (the blocked axis, 4 per texel). Op ${OP}.
//   BatchNormalization: t1..t4 = scale, bias, mean, var [C]; f[0].x = epsilon
//   InstanceNormalization: t1, t2 = scale, bias [C]; f[0].x = epsilon;
//       i[0].x = texture rows of one (n, channel block) plane
//   LRN: i[0].y = size; f[0] = (alpha, beta, bias)

@group(0) @binding(1) var X: texture_2d<f32>;
@group(0) @binding(2) var P1: texture_2d<f32>;
@group(0) @binding(3) var P2: texture_2d<f32>;
@group(0) @binding(4) var P3: texture_2d<f32>;
@group(0) @binding(5) var P4: texture_2d<f32>;

fn op_BatchNormalization(p: vec2<u32>, b: array<u32, 6>) -> vec4<f32> {
    let cb = b[U.o.d1.z];
    let x = ld(X, p.x, p.y);
    let inv = inverseSqrt(ld(P4, cb, 0u) + U.f[0].x);
    return (x - ld(P3, cb, 0u)) * inv * ld(P1, cb, 0u) + ld(P2, cb, 0u);
}

fn op_InstanceNormalization(p: vec2<u32>, b: array<u32, 6>) -> vec4<f32> {
    let cb = b[U.o.d1.z];
    let rows = u32(U.i[0].x);
    let y0 = p.y - p.y % rows;
    let w = U.o.d1.w;
    var s = vec4<f32>(0.0);
    for (var y = y0; y < y0 + rows; y++) {
        for (var x = 0u; x < w; x++) {
            s += ld(X, x, y);
        }
    }
    let n = f32(rows * w);
    let mean = s / n;
    var q = vec4<f32>(0.0);
    for (var y = y0; y < y0 + rows; y++) {
        for (var x = 0u; x < w; x++) {
            let d = ld(X, x, y) - mean;
            q += d * d;
        }
    }
    let inv = inverseSqrt(q / n + U.f[0].x);
    return (ld(X, p.x, p.y) - mean) * inv * ld(P1, cb, 0u) + ld(P2, cb, 0u);
}

fn op_LRN(p: vec2<u32>, b: array<u32, 6>) -> vec4<f32> {
    let ax = U.o.d1.z;
    let C = i32(dims6(U.o)[ax]);
    let size = U.i[0].y;
    let lo = (size - 1) / 2;
    let hi = size - 1 - lo;
    let x = ld(X, p.x, p.y);
    var r = vec4<f32>(0.0);
    for (var c = 0; c < 4; c++) {
        let ch = i32(b[ax] * 4u) + c;
        var s = 0.0;
        for (var i = max(0, ch - lo); i <= min(C - 1, ch + hi); i++) {
            var e = b;
            e[ax] = u32(i);
            let v = load_elem(X, U.o, e);
            s += v * v;
        }
        r[c] = x[c] / pow(U.f[0].z + U.f[0].x / f32(size) * s, U.f[0].y);
    }
    return r;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let b = texel_index(U.o, p);
    return keep_valid(U.o, b, op_${OP}(p, b));
}

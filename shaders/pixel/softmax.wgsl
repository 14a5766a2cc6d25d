// Softmax / LogSoftmax over the last axis, which runs along the texture's x: one texture
// row is one softmax group per component (i[0].x = 0), or, when the last axis is also the
// blocked one (rank <= 2, i[0].x = 1), one group for the whole row. Op ${OP}.

const ROW: bool = ${ROW};

@group(0) @binding(1) var X: texture_2d<f32>;

fn finish_Softmax(x: vec4<f32>, m: vec4<f32>, s: vec4<f32>) -> vec4<f32> {
    return exp(x - m) / s;
}

fn finish_LogSoftmax(x: vec4<f32>, m: vec4<f32>, s: vec4<f32>) -> vec4<f32> {
    return x - m - log(s);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let w = U.o.d1.w;
    let ninf = vec4<f32>(-f_inf());
    var m = ninf;
    var s = vec4<f32>(0.0);
    if (!ROW) {
        for (var x = 0u; x < w; x++) {
            m = max(m, ld(X, x, p.y));
        }
        for (var x = 0u; x < w; x++) {
            s += exp(ld(X, x, p.y) - m);
        }
    } else {
        let n = U.o.r1.w;
        var mx = -f_inf();
        for (var x = 0u; x < w; x++) {
            let valid = vec4<u32>(0u, 1u, 2u, 3u) + 4u * x < vec4<u32>(n);
            let v = select(ninf, ld(X, x, p.y), valid);
            mx = max(mx, max(max(v.x, v.y), max(v.z, v.w)));
        }
        var sum = 0.0;
        for (var x = 0u; x < w; x++) {
            let valid = vec4<u32>(0u, 1u, 2u, 3u) + 4u * x < vec4<u32>(n);
            sum += dot(select(vec4<f32>(0.0), exp(ld(X, x, p.y) - mx), valid), vec4<f32>(1.0));
        }
        m = vec4<f32>(mx);
        s = vec4<f32>(sum);
    }
    let r = finish_${OP}(ld(X, p.x, p.y), m, s);
    return select(vec4<f32>(0.0), r, mask_at(U.o, p));
}

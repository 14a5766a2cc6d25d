// Concat of up to 8 inputs. i[0] = (inputs, axis (padded), whole-texel copies, 0);
// i[1], i[2] = start of each input along the axis. Whole-texel copies apply when the axis
// is not the blocked one, or when every start is a multiple of 4 (2: and the blocked axis
// is not the x axis, so no index arithmetic is needed). 3: the blocked axis off x at other
// starts (one texel load per component); 0: any other concat, per element.

const MODE: i32 = ${MODE};

@group(0) @binding(1) var t0: texture_2d<f32>;
@group(0) @binding(2) var t1: texture_2d<f32>;
@group(0) @binding(3) var t2: texture_2d<f32>;
@group(0) @binding(4) var t3: texture_2d<f32>;
@group(0) @binding(5) var t4: texture_2d<f32>;
@group(0) @binding(6) var t5: texture_2d<f32>;
@group(0) @binding(7) var t6: texture_2d<f32>;
@group(0) @binding(8) var t7: texture_2d<f32>;

fn start_of(k: u32) -> u32 {
    let v = select(U.i[2], U.i[1], k < 4u);
    return u32(v[k % 4u]);
}

fn which(a: u32) -> u32 {
    var k = 0u;
    for (var j = 1u; j < u32(U.i[0].x); j++) {
        if (a >= start_of(j)) {
            k = j;
        }
    }
    return k;
}

fn texel_k(k: u32, c: vec2<u32>) -> vec4<f32> {
    switch k {
        case 0u: { return ld(t0, c.x, c.y); }
        case 1u: { return ld(t1, c.x, c.y); }
        case 2u: { return ld(t2, c.x, c.y); }
        case 3u: { return ld(t3, c.x, c.y); }
        case 4u: { return ld(t4, c.x, c.y); }
        case 5u: { return ld(t5, c.x, c.y); }
        case 6u: { return ld(t6, c.x, c.y); }
        default: { return ld(t7, c.x, c.y); }
    }
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    if (MODE == 2) {
        // channel concat at multiples of 4 with channels off the x axis: whole rows
        let p = vec2<u32>(pos.xy);
        let rows = U.o.r1.z;
        let h = p.y % rows;
        let t = p.y / rows;
        let cbo = (U.o.r1.w + 3u) / 4u;
        let cb = t % cbo;
        let n = t / cbo;
        let k = which(cb * 4u);
        let cbk = (U.t[k].r1.w + 3u) / 4u;
        return texel_k(k, vec2<u32>(p.x, (n * cbk + cb - start_of(k) / 4u) * rows + h));
    }
    if (MODE == 3) {
        // channel concat at other starts, channels off the x axis: each component finds
        // its input, block and lane with a few integer ops
        let p = vec2<u32>(pos.xy);
        let rows = U.o.r1.z;
        let h = p.y % rows;
        let t = p.y / rows;
        let cbo = (U.o.r1.w + 3u) / 4u;
        let n = t / cbo;
        let c0 = (t % cbo) * 4u;
        var r = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c++) {
            if (c0 + c < U.o.r1.w) {
                let k = which(c0 + c);
                let local = c0 + c - start_of(k);
                let cbk = (U.t[k].r1.w + 3u) / 4u;
                r[c] = texel_k(k, vec2<u32>(p.x, (n * cbk + local / 4u) * rows + h))[local % 4u];
            }
        }
        return r;
    }
    let b = texel_index(U.o, vec2<u32>(pos.xy));
    let axis = u32(U.i[0].y);
    let blocked = U.o.d1.z == axis;
    if (MODE != 0) {
        let a = select(b[axis], b[axis] * 4u, blocked);
        let k = which(a);
        var bi = b;
        bi[axis] = select(a - start_of(k), (a - start_of(k)) / 4u, blocked);
        return texel_k(k, block_coord(U.t[k], bi));
    }
    let mask = valid_mask(U.o, b);
    var r = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (mask[c]) {
            var e = elem_of(U.o, b, c);
            let k = which(e[axis]);
            e[axis] -= start_of(k);
            let q = elem_coord(U.t[k], e);
            r[c] = texel_k(k, q.xy)[q.z];
        }
    }
    return r;
}

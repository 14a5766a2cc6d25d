// Data movement, one gathered element per component (Reshapes are reshape.wgsl's). Map ${MAP}:
//   affine: input index k = start[k] + step[k] * out[src[k]] (src < 0: start only), then per
//           axis: 0 as is, 1 wrap (modulo: Tile, Expand), 2 constant f[0].x outside,
//           3 reflect, 4 edge (Transpose, Slice, Split, Pad, Expand, Tile where some axis
//           wraps, pads or reflects; the rest are permute.wgsl's linear shuffles).
// i[0..1] = src, i[2..3] = start, i[4..5] = step, i[6..7] = per-axis mode (6 values each).

@group(0) @binding(1) var X: texture_2d<f32>;

fn six(a: vec4<i32>, b: vec4<i32>, k: u32) -> i32 {
    if (k < 4u) {
        return a[k];
    }
    return b[k - 4u];
}

fn map_affine(e: array<u32, 6>) -> array<i32, 6> {
    var r: array<i32, 6>;
    for (var k = 0u; k < 6u; k++) {
        let src = six(U.i[0], U.i[1], k);
        var v = six(U.i[2], U.i[3], k);
        if (src >= 0) {
            v += six(U.i[4], U.i[5], k) * i32(e[u32(src)]);
        }
        r[k] = v;
    }
    return r;
}

// Element e of the output; NaN-free: outside values come from f[0].x.
fn gather_elem(e: array<u32, 6>) -> f32 {
    let r = map_${MAP}(e);
    let id = dims6(U.t[0]);
    var ei: array<u32, 6>;
    for (var k = 0u; k < 6u; k++) {
        let d = i32(id[k]);
        var v = r[k];
        let mode = six(U.i[6], U.i[7], k);
        if (mode == 1) {
            v = ((v % d) + d) % d;
        } else if (mode == 2) {
            if (v < 0 || v >= d) {
                return U.f[0].x;
            }
        } else if (mode == 3) {
            if (d == 1) {
                v = 0;
            } else {
                let period = 2 * (d - 1);
                v = ((v % period) + period) % period;
                v = select(v, period - v, v >= d);
            }
        } else if (mode == 4) {
            v = clamp(v, 0, d - 1);
        }
        ei[k] = u32(v);
    }
    return load_elem(X, U.t[0], ei);
}

//!include pixel/per_element.wgsl

fn element(e: array<u32, 6>) -> f32 {
    return gather_elem(e);
}

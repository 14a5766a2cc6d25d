// First level of rowstats.wgsl's statistics for long rows, for GPUs: fragment (x, y) reduces
// chunk x / 2 (CHUNK texels) of texture row y into partial statistic x % 2, which
// rowstats_merge.wgsl combines. One fragment looping over a whole row of 1500 texels (Whisper's
// attention scores) took 2.3 ms a Softmax on a real GPU. Op ${OP}:
//   softmax: 0 = the chunk's maximum, 1 = sum of exp(x - that maximum) (0 for a chunk of -inf)
//   moments: 0 = sum of (x - c), 1 = sum of (x - c)^2, c the row's first element
//   sum:     0 = sum (1 unused)
// ROW as in rowstats.wgsl; the sums stay per component (merged, then summed across them).

const ROW: bool = ${ROW};
const CHUNK: u32 = ${CHUNK}u;

@group(0) @binding(1) var X: texture_2d<f32>;

//!include pixel/rowstats_common.wgsl

fn part_softmax(s: u32, y: u32, x0: u32, x1: u32) -> vec4<f32> {
    var m = vec4<f32>(-f_inf());
    for (var x = x0; x < x1; x++) {
        m = max(m, at(x, y, -f_inf()));
    }
    m = hmax(m);
    if (s == 0u) {
        return m;
    }
    var a = vec4<f32>(0.0);
    for (var x = x0; x < x1; x++) {
        a += exp(at(x, y, -f_inf()) - m);
    }
    // a chunk of -inf adds nothing to a finite row (exp(-inf - -inf) would make it NaN)
    return select(hsum(a), vec4<f32>(0.0), m == vec4<f32>(-f_inf()));
}

fn part_moments(s: u32, y: u32, x0: u32, x1: u32) -> vec4<f32> {
    let c = moments_shift(y);
    var acc = vec4<f32>(0.0);
    for (var x = x0; x < x1; x++) {
        let d = at(x, y, c.x) - c;
        acc += select(d * d, d, s == 0u);
    }
    return acc;
}

fn part_sum(s: u32, y: u32, x0: u32, x1: u32) -> vec4<f32> {
    var a = vec4<f32>(0.0);
    for (var x = x0; x < x1; x++) {
        a += at(x, y, 0.0);
    }
    return a;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let x0 = (p.x / 2u) * CHUNK;
    return part_${OP}(p.x % 2u, p.y, x0, min(x0 + CHUNK, row_width()));
}

// Reshape as a texel shuffle. A layout is fixed by three numbers: pre (elements before the
// blocked axis), the blocked axis' extent d and inner (elements after it); texels run in
// row-major order over (pre, d / 4, inner), rows of the texture width each. A Reshape keeps
// the elements' row-major position f, so each output texel finds its input texels from f
// with a few divisions per texel instead of decomposing every element over 6 dims.
// Map ${LANES}:
//   0 same: both tensors hold the same texels in the same order (only the texture width may
//     differ): one aligned texel load.
//   1 stride: the 4 components of an output texel are one component of 4 input texels a fixed
//     number of texels apart (shufflenet's channel shuffle); placed once per texel.
//   2 any: every component is placed on its own (still 3 divisions, no index arrays).
// i[0] = output (inner, texels along the blocked axis, blocked extent, texture width)
// i[1] = the same of the input
// i[2] = (x, y) step between the 4 input texels of a stride map (LANE_DIV: found by division
//        from their row-major indices, i[2].z apart)

const LANES: u32 = ${LANES}u;
const LANE_DIV: bool = ${LANE_DIV};

@group(0) @binding(1) var X: texture_2d<f32>;

// Component k of v with selects: a dynamic vector index is slow on lavapipe.
fn pick(v: vec4<f32>, k: u32) -> f32 {
    return select(select(v.x, v.y, k == 1u), select(v.z, v.w, k == 3u), k >= 2u);
}

// (texel index in row-major texel order, component) of the input's element at position f
fn in_texel(f: u32) -> vec2<u32> {
    let l = vec4<u32>(U.i[1]);
    let k = f / l.x;
    let w = f - k * l.x;
    let pre = k / l.z;
    let a = k - pre * l.z;
    return vec2<u32>((pre * l.y + (a >> 2u)) * l.x + w, a & 3u);
}

// Texture coordinate of the input texel with row-major index t
fn in_coord(t: u32) -> vec2<u32> {
    let width = u32(U.i[1].w);
    let y = t / width;
    return vec2<u32>(t - y * width, y);
}

fn ld2(c: vec2<u32>) -> vec4<f32> {
    return ld(X, c.x, c.y);
}

fn lane(f: u32) -> f32 {
    let l = in_texel(f);
    return pick(ld2(in_coord(l.x)), l.y);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let o = vec4<u32>(U.i[0]);
    let t = p.y * o.w + p.x;
    // the output texel's (pre, block, inner) and its lanes that hold elements
    let k = t / o.x;
    let w = t - k * o.x;
    let pre = k / o.y;
    let blk = k - pre * o.y;
    let valid = vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(o.z - blk * 4u);
    if (LANES == 0u) {
        return select(vec4<f32>(0.0), ld2(in_coord(t)), valid);
    }
    // row-major position of component 0; component c is c * inner further on
    let f0 = (pre * o.z + blk * 4u) * o.x + w;
    var r: vec4<f32>;
    if (LANES == 1u) {
        let l = in_texel(f0);
        let c0 = in_coord(l.x);
        var c1 = c0 + vec2<u32>(U.i[2].xy);
        var c2 = c1 + vec2<u32>(U.i[2].xy);
        var c3 = c2 + vec2<u32>(U.i[2].xy);
        if (LANE_DIV) {
            let step = u32(U.i[2].z);
            c1 = in_coord(l.x + step);
            c2 = in_coord(l.x + 2u * step);
            c3 = in_coord(l.x + 3u * step);
        }
        // lanes past the end read component 0's texel instead of going out of bounds
        let v0 = ld2(c0);
        let v1 = ld2(select(c0, c1, valid.y));
        let v2 = ld2(select(c0, c2, valid.z));
        let v3 = ld2(select(c0, c3, valid.w));
        // component l.y of each: one select tree on the transposed 4x4 block
        let k2 = l.y;
        let cx = vec4<f32>(v0.x, v1.x, v2.x, v3.x);
        let cy = vec4<f32>(v0.y, v1.y, v2.y, v3.y);
        let cz = vec4<f32>(v0.z, v1.z, v2.z, v3.z);
        let cw = vec4<f32>(v0.w, v1.w, v2.w, v3.w);
        r = select(select(cx, cy, k2 == 1u), select(cz, cw, k2 == 3u), k2 >= 2u);
    } else {
        // lanes past the end repeat component 0 instead of reading out of bounds
        let f = select(vec4<u32>(f0), f0 + vec4<u32>(0u, 1u, 2u, 3u) * o.x, valid);
        r = vec4<f32>(lane(f.x), lane(f.y), lane(f.z), lane(f.w));
    }
    return select(vec4<f32>(0.0), r, valid);
}

// Prelude of every GPU_PIXEL shader: the full-screen triangle, the uniform block and the
// tensor-in-texture addressing (layout described in engine/backends/gpu_pixel/__init__.py).

//!include pixel/vec4.wgsl

// A tensor's texture layout. Shapes are padded with leading 1s to rank 6.
//   d0 = dims 0..3; d1 = (dim 4, dim 5, blocked axis, texture width = texels of dim 5)
//   r0 = texture rows per step of axes 0..3;
//   r1 = (rows per step of axis 4, height, rows per step of the blocked axis (0: it runs
//         along x), extent of the blocked axis)
struct Desc {
    d0: vec4<u32>,
    d1: vec4<u32>,
    r0: vec4<u32>,
    r1: vec4<u32>,
}

// o: the output; t: the inputs; i/f: per-kernel integer and float parameters.
struct Params {
    o: Desc,
    t: array<Desc, 8>,
    i: array<vec4<i32>, 8>,
    f: array<vec4<f32>, 8>,
}

@group(0) @binding(0) var<uniform> U: Params;

@vertex
fn vs_main(@builtin(vertex_index) vi: u32) -> @builtin(position) vec4<f32> {
    // (-1,-1), (3,-1), (-1,3): one triangle covering the whole render target
    let x = f32(i32(vi & 1u) * 4 - 1);
    let y = f32(i32(vi >> 1u) * 4 - 1);
    return vec4<f32>(x, y, 0.0, 1.0);
}

fn dims6(t: Desc) -> array<u32, 6> {
    return array<u32, 6>(t.d0.x, t.d0.y, t.d0.z, t.d0.w, t.d1.x, t.d1.y);
}

fn rows5(t: Desc) -> array<u32, 5> {
    return array<u32, 5>(t.r0.x, t.r0.y, t.r0.z, t.r0.w, t.r1.x);
}

// dims with the blocked axis counted in texels
fn blocked6(t: Desc) -> array<u32, 6> {
    var d = dims6(t);
    let ax = t.d1.z;
    d[ax] = (d[ax] + 3u) / 4u;
    return d;
}

// Blocked index (blocked axis in texels) of the texel at pixel p of a tensor.
fn texel_index(t: Desc, p: vec2<u32>) -> array<u32, 6> {
    let bd = blocked6(t);
    var b: array<u32, 6>;
    b[5] = p.x;
    var y = p.y;
    for (var k = 4; k >= 0; k--) {
        b[k] = y % bd[k];
        y = y / bd[k];
    }
    return b;
}

// Element index of component c of the texel with blocked index b.
fn elem_of(t: Desc, b: array<u32, 6>, c: u32) -> array<u32, 6> {
    var e = b;
    let ax = t.d1.z;
    e[ax] = b[ax] * 4u + c;
    return e;
}

// Components of the texel with blocked index b that hold real elements (not padding).
fn valid_mask(t: Desc, b: array<u32, 6>) -> vec4<bool> {
    let ax = t.d1.z;
    let first = b[ax] * 4u;
    let n = dims6(t)[ax];
    return vec4<bool>(first < n, first + 1u < n, first + 2u < n, first + 3u < n);
}

fn keep_valid(t: Desc, b: array<u32, 6>, v: vec4<f32>) -> vec4<f32> {
    return select(vec4<f32>(0.0), v, valid_mask(t, b));
}

// Texture coordinate and component of element e of tensor t.
fn elem_coord(t: Desc, e: array<u32, 6>) -> vec3<u32> {
    let ax = t.d1.z;
    let rs = rows5(t);
    var b = e;
    b[ax] = e[ax] / 4u;
    var y = 0u;
    for (var k = 0; k < 5; k++) {
        y += b[k] * rs[k];
    }
    return vec3<u32>(b[5], y, e[ax] % 4u);
}

fn load_elem(tex: texture_2d<f32>, t: Desc, e: array<u32, 6>) -> f32 {
    let c = elem_coord(t, e);
    let v = textureLoad(tex, vec2<i32>(i32(c.x), i32(c.y)), 0);
    return v[c.z];
}

// Element e of an output-shaped index read from t with numpy broadcasting (dims of 1 repeat).
fn load_bcast(tex: texture_2d<f32>, t: Desc, e: array<u32, 6>) -> f32 {
    let d = dims6(t);
    var ei = e;
    for (var k = 0; k < 6; k++) {
        if (d[k] == 1u) {
            ei[k] = 0u;
        }
    }
    return load_elem(tex, t, ei);
}

// The 4 elements of output texel b (components past the end repeat the last valid one).
fn load_bcast4(tex: texture_2d<f32>, t: Desc, b: array<u32, 6>) -> vec4<f32> {
    let n = dims6(U.o)[U.o.d1.z];
    let last = n - 1u - b[U.o.d1.z] * 4u;
    var r: vec4<f32>;
    for (var c = 0u; c < 4u; c++) {
        let e = elem_of(U.o, b, min(c, last));
        r[c] = load_bcast(tex, t, e);
    }
    return r;
}

fn ld(tex: texture_2d<f32>, x: u32, y: u32) -> vec4<f32> {
    return textureLoad(tex, vec2<i32>(i32(x), i32(y)), 0);
}

// Texture coordinate of the texel with blocked index b.
fn block_coord(t: Desc, b: array<u32, 6>) -> vec2<u32> {
    let rs = rows5(t);
    var y = 0u;
    for (var k = 0; k < 5; k++) {
        y += b[k] * rs[k];
    }
    return vec2<u32>(b[5], y);
}

// Channel block (block index along the blocked axis) of the texel at pixel p of tensor t.
fn block_of(t: Desc, p: vec2<u32>) -> u32 {
    if (t.r1.z == 0u) {
        return p.x;
    }
    return (p.y / t.r1.z) % ((t.r1.w + 3u) / 4u);
}

// Components of the texel at pixel p of t that hold real elements (cheap form of valid_mask).
fn mask_at(t: Desc, p: vec2<u32>) -> vec4<bool> {
    let left = t.r1.w - block_of(t, p) * 4u;
    return vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(left);
}

// Range: y[i] = start + i * delta. Integers are computed in i32 (`words` 2 writes int64 with
// the sign in the high word); floats in f32.
struct Params { n: i32, words: i32, is_int: i32, istart: i32, idelta: i32, fstart: f32,
                fdelta: f32, p0: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    if (p.is_int == 0) {
        y[i] = bitcast<u32>(p.fstart + f32(i) * p.fdelta);
        return;
    }
    let v = p.istart + i * p.idelta;
    if (p.words == 2) {
        y[2 * i] = bitcast<u32>(v);
        y[2 * i + 1] = select(0u, 0xffffffffu, v < 0);
    } else {
        y[i] = bitcast<u32>(v);
    }
}

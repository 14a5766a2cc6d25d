// y[b, c, r] = x[b, r, c]: a batch of row-major R x C matrices transposed, R and C multiples
// of 4. Each invocation moves one 4 x 4 block: four vec4 loads along x's rows, a transpose
// in registers, four vec4 stores along y's rows. The general strided copy (copy.wgsl) moves
// such a transpose one word at a time, reading with a stride of R or C words.
// Consecutive invocations take consecutive blocks along r, so the stores of a workgroup
// are contiguous (y's rows); its loads are one 64-byte run per row of x.
struct Params { R4: i32, C4: i32, blocks: i32, pad0: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<u32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let t = i32(g.x + g.y * nw.x * 64u);
    if (t >= p.blocks) { return; }
    let per = p.R4 * p.C4;
    let b = t / per;
    let rest = t % per;
    let cb = rest / p.R4;
    let rb = rest % p.R4;
    // x row r = 4 rb + i holds vec4 cb of its C4; y row c = 4 cb + j holds vec4 rb of its R4
    let xi = b * per * 4 + rb * 4 * p.C4 + cb;
    let r0 = x[xi];
    let r1 = x[xi + p.C4];
    let r2 = x[xi + 2 * p.C4];
    let r3 = x[xi + 3 * p.C4];
    let yi = b * per * 4 + cb * 4 * p.R4 + rb;
    y[yi] = vec4<u32>(r0.x, r1.x, r2.x, r3.x);
    y[yi + p.R4] = vec4<u32>(r0.y, r1.y, r2.y, r3.y);
    y[yi + 2 * p.R4] = vec4<u32>(r0.z, r1.z, r2.z, r3.z);
    y[yi + 3 * p.R4] = vec4<u32>(r0.w, r1.w, r2.w, r3.w);
}

// Attention out = softmax(scale * Q K^T [+ mask | keep ? . : fill]) V in one dispatch: one
// query row per invocation walks the keys four at a time with the "online" softmax (a
// running maximum and sum; the row's accumulated output is rescaled when the maximum grows),
// so the [L, M] scores never go to memory (unfused, a 1500-token encoder wrote and re-read
// them four times: MatMul, Div, Softmax, MatMul). The 64 rows of a workgroup read the same
// keys and values at the same time.
// Q: [batch, L, DK]; KT: [batch, DK, M] (K transposed, as the scores' MatMul reads it);
// V: [batch, M, DV] and out: [batch, L, DV] as vec4 rows (DV = 4 * DV4). The mask of row r,
// key j, batch b = b0 * nb1 + b1 is mask[b0 * ms0 + b1 * ms1 + r * msl + j * msm] (zero
// strides broadcast it): MODE 1 adds it to the scaled scores, MODE 2 keeps a score where it
// is non-zero and puts `fill` elsewhere (Where), MODE 0 has none.
struct Params {
    L: i32, M: i32, nb1: i32, pad0: i32,
    scale: f32, fill: f32, pad1: i32, pad2: i32,
    ms0: i32, ms1: i32, msl: i32, msm: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kt: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> mask: array<${MASK_T}>;
@group(0) @binding(5) var<storage, read_write> out: array<vec4<f32>>;

const DK: i32 = ${DK};
const DV4: i32 = ${DV4};
const MODE: i32 = ${MODE};
const ACC: i32 = 4 * ${DV4};

// the scores of key j for rows at (their mask offsets), with the mask applied
fn masked(s: vec4<f32>, at: vec4<i32>, j: i32) -> vec4<f32> {
    if (MODE == 0) {
        return s;
    }
    let k = at + vec4<i32>(j * p.msm);
    let w = vec4<f32>(f32(mask[k.x]), f32(mask[k.y]), f32(mask[k.z]), f32(mask[k.w]));
    if (MODE == 1) {
        return s + w;
    }
    return select(vec4<f32>(p.fill), s, w != vec4<f32>(0.0));
}

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let r0 = i32(g.x) * 4;
    let b = i32(g.y);
    let L = p.L;
    let M = p.M;
    if (r0 >= L) { return; }
    // rows r0..r0+3 (the last clamped to L - 1: computed twice, stored once)
    let rows = min(vec4<i32>(r0) + vec4<i32>(0, 1, 2, 3), vec4<i32>(L - 1));
    var qr: array<vec4<f32>, DK>;
    let qb = b * L * DK;
    for (var d = 0; d < DK; d++) {
        qr[d] = vec4<f32>(q[qb + rows.x * DK + d], q[qb + rows.y * DK + d],
                          q[qb + rows.z * DK + d], q[qb + rows.w * DK + d]);
    }
    let kb = b * DK * M;
    let vb = b * M * DV4;
    let mb = (b / p.nb1) * p.ms0 + (b % p.nb1) * p.ms1;
    let at = vec4<i32>(mb) + rows * p.msl;
    let neg_inf = bitcast<f32>(0xff800000u);
    var top = vec4<f32>(-3.4e38);
    var sum = vec4<f32>(0.0);
    var acc: array<vec4<f32>, ACC>;
    for (var j0 = 0; j0 < M; j0 += 4) {
        let j = min(vec4<i32>(j0) + vec4<i32>(0, 1, 2, 3), vec4<i32>(M - 1));
        var s0 = vec4<f32>(0.0);
        var s1 = vec4<f32>(0.0);
        var s2 = vec4<f32>(0.0);
        var s3 = vec4<f32>(0.0);
        for (var d = 0; d < DK; d++) {
            let kd = kb + d * M;
            let qd = qr[d];
            s0 += qd * kt[kd + j.x];
            s1 += qd * kt[kd + j.y];
            s2 += qd * kt[kd + j.z];
            s3 += qd * kt[kd + j.w];
        }
        s0 = masked(s0 * p.scale, at, j.x);
        s1 = masked(s1 * p.scale, at, j.y);
        s2 = masked(s2 * p.scale, at, j.z);
        s3 = masked(s3 * p.scale, at, j.w);
        if (j0 + 4 > M) {  // keys past M: -inf (a run-time value: WGSL has no such literal)
            s1 = select(s1, vec4<f32>(neg_inf), j0 + 1 >= M);
            s2 = select(s2, vec4<f32>(neg_inf), j0 + 2 >= M);
            s3 = select(s3, vec4<f32>(neg_inf), j0 + 3 >= M);
        }
        let grown = max(top, max(max(s0, s1), max(s2, s3)));
        let c = exp(top - grown);
        let e0 = exp(s0 - grown);
        let e1 = exp(s1 - grown);
        let e2 = exp(s2 - grown);
        let e3 = exp(s3 - grown);
        sum = sum * c + ((e0 + e1) + (e2 + e3));
        top = grown;
        let v0 = vb + j.x * DV4;
        let v1 = vb + j.y * DV4;
        let v2 = vb + j.z * DV4;
        let v3 = vb + j.w * DV4;
        for (var u = 0; u < DV4; u++) {
            let a = v[v0 + u];
            let bb = v[v1 + u];
            let cc = v[v2 + u];
            let dd = v[v3 + u];
            acc[u] = acc[u] * c.x + e0.x * a + e1.x * bb + e2.x * cc + e3.x * dd;
            acc[DV4 + u] = acc[DV4 + u] * c.y + e0.y * a + e1.y * bb + e2.y * cc + e3.y * dd;
            acc[2 * DV4 + u] = acc[2 * DV4 + u] * c.z + e0.z * a + e1.z * bb + e2.z * cc
                + e3.z * dd;
            acc[3 * DV4 + u] = acc[3 * DV4 + u] * c.w + e0.w * a + e1.w * bb + e2.w * cc
                + e3.w * dd;
        }
    }
    let inv = 1.0 / sum;
    for (var k = 0; k < 4; k++) {
        if (r0 + k < L) {
            let ob = (b * L + r0 + k) * DV4;
            for (var u = 0; u < DV4; u++) {
                out[ob + u] = acc[k * DV4 + u] * inv[k];
            }
        }
    }
}

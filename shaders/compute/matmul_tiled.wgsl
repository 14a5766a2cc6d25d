// Batched C = act(alpha * A @ B + beta * bias) for discrete GPUs: a 64x64 tile of C per
// workgroup, 4x4 per invocation, 16-deep K slices staged in workgroup memory so each element
// of A and B is read from device memory once per workgroup. Same parameters as matmul.wgsl.
// (On CPU adapters the barriers cost more than the reuse; they use matmul.wgsl.)
struct Params {
    M: i32, N: i32, K: i32, has_bias: i32,
    sam: i32, sak: i32, sbk: i32, sbn: i32,
    a_batch: i32, b_batch: i32, c_batch: i32, bias_batch: i32,
    alpha: f32, beta: f32, act_a: f32, act_b: f32,
    bias_sm: i32, bias_sn: i32, a_off: i32, b_off: i32,
    ldc: i32, c_off: i32, bias_off: i32, pad0: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

//!include common/activations.wgsl

// the fused activation (shaders/common/activations.wgsl; op_Identity when there is none)
fn act(x: f32, A: f32, B: f32) -> f32 {
    return op_${act}(x, A, B, 0.0);
}

// rows of 65: a k-fast staging (below) writes neighbouring invocations 65 words apart, in
// different banks
var<workgroup> ta: array<array<f32, 65>, 16>;
var<workgroup> tb: array<array<f32, 65>, 16>;

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let n_base = i32(wg.x) * 64;
    let m_base = i32(wg.y) * 64;
    let batch = i32(wg.z);
    let abase = p.a_off + batch * p.a_batch;
    let bbase = p.b_off + batch * p.b_batch;
    let tm = i32(l.y) * 4;
    let tn = i32(l.x) * 4;
    var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
                                  vec4<f32>(0.0));
    for (var k0 = 0; k0 < p.K; k0 += 16) {
        // neighbouring invocations load neighbouring words (coalesced): along k where an
        // operand's k stride is 1 (A row-major, B transposed), else along m or n
        for (var e = 0; e < 4; e++) {
            let idx = i32(li) + e * 256;
            let a_kfast = p.sak == 1;
            let akk = select(idx / 64, idx % 16, a_kfast);
            let am = select(idx % 64, idx / 16, a_kfast);
            let b_kfast = p.sbk == 1 && p.sbn != 1;
            let bkk = select(idx / 64, idx % 16, b_kfast);
            let bn = select(idx % 64, idx / 16, b_kfast);
            let m = m_base + am;
            let n = n_base + bn;
            let a_ok = m < p.M && k0 + akk < p.K;
            let b_ok = n < p.N && k0 + bkk < p.K;
            ta[akk][am] = select(0.0, a[select(0, abase + m * p.sam + (k0 + akk) * p.sak, a_ok)],
                                 a_ok);
            tb[bkk][bn] = select(0.0, b[select(0, bbase + (k0 + bkk) * p.sbk + n * p.sbn, b_ok)],
                                 b_ok);
        }
        workgroupBarrier();
        for (var kk = 0; kk < 16; kk++) {
            let bv = vec4<f32>(tb[kk][tn], tb[kk][tn + 1], tb[kk][tn + 2], tb[kk][tn + 3]);
            acc[0] += ta[kk][tm] * bv;
            acc[1] += ta[kk][tm + 1] * bv;
            acc[2] += ta[kk][tm + 2] * bv;
            acc[3] += ta[kk][tm + 3] * bv;
        }
        workgroupBarrier();
    }
    let cbase = p.c_off + batch * p.c_batch;
    for (var i = 0; i < 4; i++) {
        let m = m_base + tm + i;
        if (m >= p.M) { break; }
        for (var j = 0; j < 4; j++) {
            let n = n_base + tn + j;
            if (n >= p.N) { break; }
            var v = p.alpha * acc[i][j];
            if (p.has_bias != 0) {
                v += p.beta * bias[p.bias_off + batch * p.bias_batch + m * p.bias_sm
                                   + n * p.bias_sn];
            }
            y[cbase + m * p.ldc + n] = act(v, p.act_a, p.act_b);
        }
    }
}

// Batched C = act(alpha * A @ B + beta * bias), register-blocked: every invocation computes a
// 4x4 tile of C, walking K in steps of 4 with vec4 loads where the layout allows them.
// No workgroup memory and no barriers: on CPU adapters (lavapipe) barriers cost more than the
// cache reuse they buy; a workgroup-tiled variant (matmul_tiled.wgsl) serves discrete GPUs.
// A(m, k) = a[a_off + b*a_batch + m*sam + k*sak]; B(k, n) likewise; bias(m, n) with strides.
struct Params {
    M: i32, N: i32, K: i32, has_bias: i32,
    sam: i32, sak: i32, sbk: i32, sbn: i32,
    a_batch: i32, b_batch: i32, c_batch: i32, bias_batch: i32,
    alpha: f32, beta: f32, act_a: f32, act_b: f32,
    bias_sm: i32, bias_sn: i32, a_off: i32, b_off: i32,
    ldc: i32, c_off: i32, bias_off: i32, pad0: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(3) var<storage, read> bias: array<f32>;

// The operands' load forms, chosen from their strides: each file declares its binding, a_at
// or b_at (one element), load_a4 (A(m, k..k+3)) or load_b4, and the B file brings the inner
// step's form (b_tile, mac: matmul_form_dot.wgsl or matmul_form_outer.wgsl); the C file
// declares the output and store4 (matmul_c_vec4.wgsl or matmul_c_scalar.wgsl). s = (sam, sak,
// sbk, sbn) and nmax = N - 1 are passed in so that they live in registers inside the K loop
// (a uniform re-read per iteration was not hoisted on lavapipe).
//!include compute/matmul_a_${A_LOAD}.wgsl
//!include compute/matmul_b_${B_LOAD}.wgsl
//!include compute/matmul_c_${C_STORE}.wgsl
//!include common/activations.wgsl

// the fused activation (shaders/common/activations.wgsl; op_Identity when there is none)
fn act(x: f32, A: f32, B: f32) -> f32 {
    return op_${act}(x, A, B, 0.0);
}

// the epilogue of row m: scale, bias (one load when it is constant along the row), activation
fn emit(batch: i32, m: i32, n: vec4<i32>, acc: vec4<f32>) {
    var v = p.alpha * acc;
    if (p.has_bias != 0) {
        let b0 = p.bias_off + batch * p.bias_batch + m * p.bias_sm;
        let sn = p.bias_sn;
        if (sn == 0) {
            v += p.beta * bias[b0];
        } else {
            v += p.beta * vec4<f32>(bias[b0 + n.x * sn], bias[b0 + n.y * sn],
                                    bias[b0 + n.z * sn], bias[b0 + n.w * sn]);
        }
    }
    let A = p.act_a;
    let B = p.act_b;
    store4(p.c_off + batch * p.c_batch + m * p.ldc, n.x,
           vec4<f32>(act(v.x, A, B), act(v.y, A, B), act(v.z, A, B), act(v.w, A, B)));
}

@compute @workgroup_size(${WGX}, ${WGY}, 1)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let n0 = i32(g.x) * 4;
    let m0 = i32(g.y) * 4;
    let batch = i32(g.z);
    if (n0 >= p.N || m0 >= p.M) { return; }
    let abase = p.a_off + batch * p.a_batch;
    let bbase = p.b_off + batch * p.b_batch;
    // rows/cols past the edge are clamped for loads and skipped for stores
    let m1 = min(m0 + 1, p.M - 1);
    let m2 = min(m0 + 2, p.M - 1);
    let m3 = min(m0 + 3, p.M - 1);
    let n1 = min(n0 + 1, p.N - 1);
    let n2 = min(n0 + 2, p.N - 1);
    let n3 = min(n0 + 3, p.N - 1);
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    let k4 = p.K - p.K % 4;
    let s = vec4<i32>(p.sam, p.sak, p.sbk, p.sbn);
    let nmax = p.N - 1;
    for (var k = 0; k < k4; k += 4) {
        let a0 = load_a4(abase, m0, k, s, nmax);
        let a1 = load_a4(abase, m1, k, s, nmax);
        let a2 = load_a4(abase, m2, k, s, nmax);
        let a3 = load_a4(abase, m3, k, s, nmax);
        let t = b_tile(bbase, k, vec4<i32>(n0, n1, n2, n3), s, nmax);
        acc0 += mac(a0, t);
        acc1 += mac(a1, t);
        acc2 += mac(a2, t);
        acc3 += mac(a3, t);
    }
    for (var k = k4; k < p.K; k++) {
        let bk = vec4<f32>(b_at(bbase + k * p.sbk + n0 * p.sbn), b_at(bbase + k * p.sbk + n1 * p.sbn),
                           b_at(bbase + k * p.sbk + n2 * p.sbn), b_at(bbase + k * p.sbk + n3 * p.sbn));
        acc0 += a_at(abase + m0 * p.sam + k * p.sak) * bk;
        acc1 += a_at(abase + m1 * p.sam + k * p.sak) * bk;
        acc2 += a_at(abase + m2 * p.sam + k * p.sak) * bk;
        acc3 += a_at(abase + m3 * p.sam + k * p.sak) * bk;
    }
    // no array of rows: a private array indexed in a loop may live in memory on CPU adapters
    let n = vec4<i32>(n0, n1, n2, n3);
    emit(batch, m0, n, acc0);
    if (m0 + 1 < p.M) { emit(batch, m0 + 1, n, acc1); }
    if (m0 + 2 < p.M) { emit(batch, m0 + 2, n, acc2); }
    if (m0 + 3 < p.M) { emit(batch, m0 + 3, n, acc3); }
}

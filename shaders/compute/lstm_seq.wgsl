// A whole LSTM sequence in one dispatch (ONNX default activations: f = Sigmoid, g = h = Tanh):
// one workgroup per (direction, batch row) walks the time steps, its invocations sharing the
// hidden state through workgroup memory, two barriers a step. One dispatch per step (the
// other form, lstm_step.wgsl) made a streaming model's run 80 dispatches and their host
// work; here a step costs two barriers. Invocation l owns the hidden units l, l + 64, ...
// (at most UNITS of them, so H <= 64 * UNITS); its cell states stay in registers.
// The input projection X W^T of every step was computed before, as one matmul per
// direction (`gates`, [dirs][rows of X][4H]). A forward direction runs t = s, a reverse one
// t = seq - 1 - s. Buffers and Params as in lstm_step.wgsl; `state` receives the final h
// and c at [2 DBH ..) and [3 DBH ..) in Y_h/Y_c layout.
struct Params {
    seq: i32, batch: i32, inp: i32, hid: i32,
    dirs: i32, step: i32, batch_first: i32, has_bias: i32,
    rev_from: i32, pad0: i32, pad1: i32, pad2: i32,   // directions >= rev_from run backward
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gates: array<f32>;
@group(0) @binding(2) var<storage, read> r: array<f32>;
// aux: bias [dirs, 8H] | initial h | initial c (both in Y_h layout)
@group(0) @binding(3) var<storage, read> aux: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>;

const WG: i32 = 64;
const UNITS: i32 = 16;

var<workgroup> hs: array<f32, 1024>;

fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }

fn tanh_(v: f32) -> f32 {
    let e = exp(-2.0 * abs(v));
    return sign(v) * (1.0 - e) / (1.0 + e);
}

fn y_index(t: i32, d: i32, b: i32, j: i32) -> i32 {
    if (p.batch_first == 0) { return ((t * p.dirs + d) * p.batch + b) * p.hid + j; }
    return ((b * p.seq + t) * p.dirs + d) * p.hid + j;
}

fn x_row(t: i32, b: i32) -> i32 {
    if (p.batch_first == 0) { return t * p.batch + b; }
    return b * p.seq + t;
}

fn final_index(d: i32, b: i32, j: i32) -> i32 {
    if (p.batch_first == 0) { return (d * p.batch + b) * p.hid + j; }
    return (b * p.dirs + d) * p.hid + j;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let H = p.hid;
    let d = i32(wid.x) / p.batch;
    let b = i32(wid.x) % p.batch;
    let l = i32(lid.x);
    let DBH = p.dirs * p.batch * H;
    let h0 = p.dirs * 8 * H;
    let c0 = h0 + DBH;
    let rbase = d * 4 * H * H;
    var c: array<f32, UNITS>;
    var hn: array<f32, UNITS>;
    var bias: array<vec4<f32>, UNITS>;
    for (var u = 0; u < UNITS; u++) {
        let j = l + u * WG;
        if (j < H) {
            hs[j] = aux[h0 + final_index(d, b, j)];
            c[u] = aux[c0 + final_index(d, b, j)];
            if (p.has_bias != 0) {
                let bb = d * 8 * H;
                bias[u] = vec4<f32>(aux[bb + j] + aux[bb + 4 * H + j],
                                    aux[bb + H + j] + aux[bb + 5 * H + j],
                                    aux[bb + 2 * H + j] + aux[bb + 6 * H + j],
                                    aux[bb + 3 * H + j] + aux[bb + 7 * H + j]);
            } else {
                bias[u] = vec4<f32>(0.0);
            }
        }
    }
    workgroupBarrier();
    for (var s = 0; s < p.seq; s++) {
        var t = s;
        if (d >= p.rev_from) { t = p.seq - 1 - s; }
        let gb = ((d * p.seq * p.batch) + x_row(t, b)) * 4 * H;
        for (var u = 0; u < UNITS; u++) {
            let j = l + u * WG;
            if (j < H) {
                var acc = bias[u] + vec4<f32>(gates[gb + j], gates[gb + H + j],
                                              gates[gb + 2 * H + j], gates[gb + 3 * H + j]);
                let r0 = rbase + j * H;
                let hh = H * H;
                for (var k = 0; k < H; k++) {
                    acc += hs[k] * vec4<f32>(r[r0 + k], r[r0 + hh + k], r[r0 + 2 * hh + k],
                                             r[r0 + 3 * hh + k]);
                }
                let cv = sigmoid(acc.z) * c[u] + sigmoid(acc.x) * tanh_(acc.w);
                c[u] = cv;
                hn[u] = sigmoid(acc.y) * tanh_(cv);
                y[y_index(t, d, b, j)] = hn[u];
            }
        }
        workgroupBarrier();  // every invocation has read the previous hidden state
        for (var u = 0; u < UNITS; u++) {
            let j = l + u * WG;
            if (j < H) { hs[j] = hn[u]; }
        }
        workgroupBarrier();
    }
    for (var u = 0; u < UNITS; u++) {
        let j = l + u * WG;
        if (j < H) {
            state[2 * DBH + final_index(d, b, j)] = hs[j];
            state[3 * DBH + final_index(d, b, j)] = c[u];
        }
    }
}

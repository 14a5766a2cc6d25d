// A whole LSTM sequence in one dispatch (ONNX default activations: f = Sigmoid, g = h = Tanh):
// one workgroup per (direction, batch row) walks the time steps, its invocations sharing the
// hidden state through workgroup memory, two barriers a step. One dispatch per step (the
// other form, lstm_step.wgsl) made a streaming model's run 80 dispatches and their host
// work; here a step costs two barriers. Invocation l owns the hidden units l, l + 64, ...
// (at most UNITS of them, so H <= 64 * UNITS); its cell states stay in registers.
// The input projection X W^T of every step was computed before, as one matmul per
// direction (`gates`, [dirs][rows of X][4H]). A forward direction runs t = s, a reverse one
// t = seq - 1 - s. Buffers and Params in lstm_common.wgsl; `state` receives the final h
// and c at [2 DBH ..) and [3 DBH ..) in Y_h/Y_c layout.
//!include compute/lstm_common.wgsl

const WG: i32 = 64;
const UNITS: i32 = 16;

var<workgroup> hs: array<f32, 1024>;

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

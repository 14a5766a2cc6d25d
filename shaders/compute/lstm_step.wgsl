// One time step of an LSTM (ONNX default activations: f = Sigmoid, g = h = Tanh), for every
// direction, batch row and hidden unit at once (one invocation each). The input projection
// X W^T of every step was computed before the steps as one matmul per direction (`gates`,
// [dirs][rows of X][4H]); a step adds the recurrent part. A forward direction
// runs t = s, a reverse one t = seq - 1 - s. The previous hidden state is read from Y (or
// the initial state at the first step); the cell state ping-pongs between two halves of
// `state`. At the last step the final hidden and cell states are written in Y_h/Y_c layout.
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
// state: c ping [dirs*batch*H] | c pong | final h (Y_h layout) | final c (Y_c layout)
@group(0) @binding(5) var<storage, read_write> state: array<f32>;

fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }

fn tanh_(v: f32) -> f32 {
    let e = exp(-2.0 * abs(v));
    return sign(v) * (1.0 - e) / (1.0 + e);
}

fn y_index(t: i32, d: i32, b: i32, j: i32) -> i32 {
    if (p.batch_first == 0) { return ((t * p.dirs + d) * p.batch + b) * p.hid + j; }
    return ((b * p.seq + t) * p.dirs + d) * p.hid + j;
}

// the row of X (and of each direction's gates) holding step t of batch row b
fn x_row(t: i32, b: i32) -> i32 {
    if (p.batch_first == 0) { return t * p.batch + b; }
    return b * p.seq + t;
}

fn final_index(d: i32, b: i32, j: i32) -> i32 {
    if (p.batch_first == 0) { return (d * p.batch + b) * p.hid + j; }
    return (b * p.dirs + d) * p.hid + j;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let H = p.hid;
    let n = p.dirs * p.batch * H;
    let id = i32(g.x + g.y * nw.x * 64u);
    if (id >= n) { return; }
    let j = id % H;
    let b = (id / H) % p.batch;
    let d = id / (H * p.batch);
    let s = p.step;
    var t = s;
    var t_prev = s - 1;
    if (d >= p.rev_from) { t = p.seq - 1 - s; t_prev = t + 1; }
    let DBH = n;
    let h0 = p.dirs * 8 * H;            // offset of the initial hidden state in aux
    let c0 = h0 + DBH;                   // offset of the initial cell state in aux
    // gate rows of W/R for direction d: i, o, f, c (ONNX order), each H rows
    let rbase = d * 4 * H * H;
    let gb = ((d * p.seq * p.batch) + x_row(t, b)) * 4 * H + j;
    var acc = vec4<f32>(gates[gb], gates[gb + H], gates[gb + 2 * H], gates[gb + 3 * H]);
    if (p.has_bias != 0) {
        let bb = d * 8 * H;
        acc += vec4<f32>(aux[bb + j] + aux[bb + 4 * H + j], aux[bb + H + j] + aux[bb + 5 * H + j],
                        aux[bb + 2 * H + j] + aux[bb + 6 * H + j],
                        aux[bb + 3 * H + j] + aux[bb + 7 * H + j]);
    }
    for (var k = 0; k < H; k++) {
        var hv: f32;
        if (s == 0) { hv = aux[h0 + final_index(d, b, k)]; }
        else { hv = y[y_index(t_prev, d, b, k)]; }
        acc += hv * vec4<f32>(r[rbase + j * H + k], r[rbase + (H + j) * H + k],
                              r[rbase + (2 * H + j) * H + k], r[rbase + (3 * H + j) * H + k]);
    }
    var c_prev: f32;
    if (s == 0) { c_prev = aux[c0 + final_index(d, b, j)]; }
    else { c_prev = state[(s % 2) * DBH + id]; }
    let gi = sigmoid(acc.x);
    let go = sigmoid(acc.y);
    let gf = sigmoid(acc.z);
    let gc = tanh_(acc.w);
    let c = gf * c_prev + gi * gc;
    let h = go * tanh_(c);
    state[((s + 1) % 2) * DBH + id] = c;
    y[y_index(t, d, b, j)] = h;
    if (s == p.seq - 1) {
        state[2 * DBH + final_index(d, b, j)] = h;
        state[3 * DBH + final_index(d, b, j)] = c;
    }
}

// What both LSTM shaders share (lstm_step.wgsl: one dispatch a step; lstm_seq.wgsl: the
// whole sequence in one): parameters, bindings, the gate activations and the index maps of
// Y, X's rows and Y_h/Y_c for either layout. `state`: c ping [dirs*batch*H] | c pong (the
// per-step form) | final h (Y_h layout) | final c (Y_c layout).
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

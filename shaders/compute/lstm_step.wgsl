// One time step of an LSTM (ONNX default activations: f = Sigmoid, g = h = Tanh), for every
// direction, batch row and hidden unit at once (one invocation each). The input projection
// X W^T of every step was computed before the steps as one matmul per direction (`gates`,
// [dirs][rows of X][4H]); a step adds the recurrent part. A forward direction
// runs t = s, a reverse one t = seq - 1 - s. The previous hidden state is read from Y (or
// the initial state at the first step); the cell state ping-pongs between two halves of
// `state`. At the last step the final hidden and cell states are written in Y_h/Y_c layout.
//!include compute/lstm_common.wgsl

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

// LSTM with the ONNX default activations (f = Sigmoid, g = h = Tanh), op ${OP}.
// The state is a [1, 2, dirs, batch, H] tensor: texel (x = j, y = d * batch + b) holds
// (h, c, 0, 0) of direction d, batch row b, hidden unit j. The history of every step's state
// is the same layout stacked by step: row (s * dirs + d) * batch + b.
//   Init:  the state from initial_h (t0) and initial_c (t1); i[1].w bit 0/1: t0/t1 given
//   Proj:  X W^T + Wb + Rb of every time step from X (t0), W (t1), B (t3) (i[1].w bit 0:
//          B given), a [seq, 4, dirs, batch, H] tensor: a texel holds the 4 gates
//   Step:  one step of every direction from the projection (t0), R (t2) and the state (t4)
//   Y:     Y from the history (t0)
//   Final: Y_h (i[2].y = 0) or Y_c (1) from the last state (t0)
// i[0] = (seq, batch, input, H); i[1] = (dirs, step, layout, flags); i[2].x: directions
// from this one on run backward (t = seq - 1 - step).

//!include common/activations.wgsl
//!include pixel/lstm_common.wgsl

@group(0) @binding(1) var T0: texture_2d<f32>;
@group(0) @binding(2) var T1: texture_2d<f32>;
@group(0) @binding(3) var T2: texture_2d<f32>;
@group(0) @binding(4) var T3: texture_2d<f32>;
@group(0) @binding(5) var T4: texture_2d<f32>;

fn op_Init(p: vec2<u32>) -> vec4<f32> {
    let d = p.y / batch_n();
    let b = p.y % batch_n();
    let e = state_elem(d, b, p.x);
    let flags = U.i[1].w;
    let h = select(0.0, load_elem(T0, U.t[0], e), (flags & 1) != 0);
    let c = select(0.0, load_elem(T1, U.t[1], e), (flags & 2) != 0);
    return vec4<f32>(h, c, 0.0, 0.0);
}

// row r of gate block of direction d in W or R ([dirs, 4H, K], blocked along 4H): the
// texture row of it and the component, for column k at x = k
fn gate_row(d: u32, r: u32) -> vec2<u32> {
    let H = u32(U.i[0].w);
    return vec2<u32>(d * ((4u * H + 3u) / 4u) + r / 4u, r % 4u);
}

// gate pre-activations from the input, for every time step at once: texel (x = j,
// y = (t * dirs + d) * batch + b) holds gates (i, o, f, c) of X W^T + Wb + Rb
fn op_Proj(p: vec2<u32>) -> vec4<f32> {
    let H = u32(U.i[0].w);
    let I = u32(U.i[0].z);
    let j = p.x;
    let b = p.y % batch_n();
    let d = (p.y / batch_n()) % dirs_n();
    let t = p.y / (batch_n() * dirs_n());
    let g0 = gate_row(d, j);
    let g1 = gate_row(d, H + j);
    let g2 = gate_row(d, 2u * H + j);
    let g3 = gate_row(d, 3u * H + j);
    var acc = vec4<f32>(0.0);
    if ((U.i[1].w & 1) != 0) {
        for (var g = 0u; g < 4u; g++) {
            acc[g] = load_elem(T3, U.t[3], array<u32, 6>(0u, 0u, 0u, 0u, d, g * H + j))
                + load_elem(T3, U.t[3], array<u32, 6>(0u, 0u, 0u, 0u, d, (4u + g) * H + j));
        }
    }
    var xe = array<u32, 6>(0u, 0u, 0u, t, b, 0u);
    if (batch_first()) {
        xe = array<u32, 6>(0u, 0u, 0u, b, t, 0u);
    }
    // X is rank 3, blocked along axis 1: its last axis runs along x, one texel a step, so
    // element k of the row sits k texels right of element 0 (no addressing in the loop)
    let xc = elem_coord(U.t[0], xe);
    for (var k = 0u; k < I; k++) {
        let xv = ld(T0, xc.x + k, xc.y)[xc.z];
        acc += xv * vec4<f32>(ld(T1, k, g0.x)[g0.y], ld(T1, k, g1.x)[g1.y],
                              ld(T1, k, g2.x)[g2.y], ld(T1, k, g3.x)[g3.y]);
    }
    return acc;
}

// one step: the projection of its time (t0) plus h_prev R^T (R t2, state t4)
fn op_Step(p: vec2<u32>) -> vec4<f32> {
    let H = u32(U.i[0].w);
    let j = p.x;
    let d = p.y / batch_n();
    let b = p.y % batch_n();
    let t = time_of(d, u32(U.i[1].y));
    let g0 = gate_row(d, j);
    let g1 = gate_row(d, H + j);
    let g2 = gate_row(d, 2u * H + j);
    let g3 = gate_row(d, 3u * H + j);
    var acc = ld(T0, j, (t * dirs_n() + d) * batch_n() + b);
    for (var k = 0u; k < H; k++) {
        let hv = ld(T4, k, p.y).x;
        acc += hv * vec4<f32>(ld(T2, k, g0.x)[g0.y], ld(T2, k, g1.x)[g1.y],
                              ld(T2, k, g2.x)[g2.y], ld(T2, k, g3.x)[g3.y]);
    }
    // gates i, o, f (Sigmoid) and c (Tanh): components x, y, z, w of acc
    let c = op_Sigmoid(acc.z, 0.0, 0.0, 0.0) * ld(T4, j, p.y).y
        + op_Sigmoid(acc.x, 0.0, 0.0, 0.0) * op_Tanh(acc.w, 0.0, 0.0, 0.0);
    let h = op_Sigmoid(acc.y, 0.0, 0.0, 0.0) * op_Tanh(c, 0.0, 0.0, 0.0);
    return vec4<f32>(h, c, 0.0, 0.0);
}

fn y_elem(e: array<u32, 6>) -> f32 {
    let c = y_coords(e);  // (t, d, b)
    let s = time_of(c.y, c.x);
    return ld(T0, e[5], (s * dirs_n() + c.y) * batch_n() + c.z).x;
}

fn final_elem(e: array<u32, 6>) -> f32 {
    // Y_h / Y_c are [dirs, batch, H], batch-first [batch, dirs, H]
    var d = e[3];
    var b = e[4];
    if (batch_first()) {
        b = e[3];
        d = e[4];
    }
    return ld(T0, e[5], d * batch_n() + b)[U.i[2].y];
}

fn op_Y(p: vec2<u32>) -> vec4<f32> {
    let bi = texel_index(U.o, p);
    let mask = valid_mask(U.o, bi);
    var r = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (mask[c]) {
            r[c] = y_elem(elem_of(U.o, bi, c));
        }
    }
    return r;
}

fn op_Final(p: vec2<u32>) -> vec4<f32> {
    let bi = texel_index(U.o, p);
    let mask = valid_mask(U.o, bi);
    var r = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (mask[c]) {
            r[c] = final_elem(elem_of(U.o, bi, c));
        }
    }
    return r;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    return op_${OP}(vec2<u32>(pos.xy));
}

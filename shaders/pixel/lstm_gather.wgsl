// LSTM outputs from the history lstm_seq.wgsl drew, op ${OP}, T (1 or 2) colour targets.
// History: texture k (T0..T7) holds units 4k..4k + 3; texel (x = s, y = d * batch + b) is h
// after step s of direction d, batch row b, and column seq is c after the last step.
//   Y:     Y [seq, dirs, batch, H] (batch-first [batch, seq, dirs, H]) into target 0
//   State: Y_h (i[2].y = 0) or Y_c (1), [dirs, batch, H] (batch-first [batch, dirs, H]),
//          into target 0; with 2 targets Y_h into target 0 and Y_c into target 1

//!include pixel/lstm_common.wgsl
//!include pixel/conv_out${T}.wgsl

@group(0) @binding(1) var T0: texture_2d<f32>;
@group(0) @binding(2) var T1: texture_2d<f32>;
@group(0) @binding(3) var T2: texture_2d<f32>;
@group(0) @binding(4) var T3: texture_2d<f32>;
@group(0) @binding(5) var T4: texture_2d<f32>;
@group(0) @binding(6) var T5: texture_2d<f32>;
@group(0) @binding(7) var T6: texture_2d<f32>;
@group(0) @binding(8) var T7: texture_2d<f32>;

// unit j of history column x, row y
fn hist(j: u32, x: u32, y: u32) -> f32 {
    let c = vec2<i32>(i32(x), i32(y));
    var v: vec4<f32>;
    switch (j / 4u) {
        case 0u: { v = textureLoad(T0, c, 0); }
        case 1u: { v = textureLoad(T1, c, 0); }
        case 2u: { v = textureLoad(T2, c, 0); }
        case 3u: { v = textureLoad(T3, c, 0); }
        case 4u: { v = textureLoad(T4, c, 0); }
        case 5u: { v = textureLoad(T5, c, 0); }
        case 6u: { v = textureLoad(T6, c, 0); }
        default: { v = textureLoad(T7, c, 0); }
    }
    return v[j % 4u];
}

fn y_elem(e: array<u32, 6>) -> f32 {
    let c = y_coords(e);  // (t, d, b)
    return hist(e[5], time_of(c.y, c.x), c.y * batch_n() + c.z);
}

// column seq - 1 holds the last h, column seq the last c
fn state_elem_out(e: array<u32, 6>, comp: u32) -> f32 {
    var d = e[3];
    var b = e[4];
    if (batch_first()) {
        b = e[3];
        d = e[4];
    }
    return hist(e[5], u32(U.i[0].x) - 1u + comp, d * batch_n() + b);
}

fn op_Y(e: array<u32, 6>, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    (*o)[0][c] = y_elem(e);
}

fn op_State(e: array<u32, 6>, c: u32, o: ptr<function, array<vec4<f32>, 8>>) {
    (*o)[0][c] = state_elem_out(e, u32(U.i[2].y));
    (*o)[1][c] = state_elem_out(e, 1u);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> Out {
    let p = vec2<u32>(pos.xy);
    let bi = texel_index(U.o, p);
    let mask = valid_mask(U.o, bi);
    var o: array<vec4<f32>, 8>;
    for (var c = 0u; c < 4u; c++) {
        if (mask[c]) {
            op_${OP}(elem_of(U.o, bi, c), c, &o);
        }
    }
    return outputs(o);
}

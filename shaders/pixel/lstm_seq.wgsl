// A whole LSTM sequence in one pass (default activations), for hidden sizes up to 4 * P.
// The fragment at (x = s, y = d * batch + b) runs steps 0..min(s, seq - 1) of direction d,
// batch row b, with h and c of every unit in private memory, and writes h after step s
// (x < seq), or c after the last step (x = seq): units 4k..4k + 3 go to colour target k.
// A row's fragments repeat each other's early steps (seq^2 / 2 steps a row instead of seq):
// on a rasteriser that costs far less than a pass per step (kernels_rnn_seq.py decides).
// T0: gate pre-activations from the input, X W^T + Wb + Rb (lstm.wgsl Proj: texel (x = j,
//     y = (t * dirs + d) * batch + b) holds gates (i, o, f, c) of unit j)
// T1: R [dirs, 4H, H], blocked along 4H: texel (x = k, y = d * H + q) holds rows 4q..4q + 3
// T2: initial_h, T3: initial_c (i[1].w bit 0 / 1: given), [dirs, batch, H] (batch-first
//     [batch, dirs, H])

//!include common/activations.wgsl
//!include pixel/lstm_common.wgsl
//!include pixel/conv_out${P}.wgsl

// the hidden size is a constant: loops of known length unroll, and the arrays, indexed by
// constants then, stay in registers
const H: u32 = ${H}u;

@group(0) @binding(1) var T0: texture_2d<f32>;
@group(0) @binding(2) var T1: texture_2d<f32>;
@group(0) @binding(3) var T2: texture_2d<f32>;
@group(0) @binding(4) var T3: texture_2d<f32>;

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> Out {
    let p = vec2<u32>(pos.xy);
    let seq = u32(U.i[0].x);
    let d = p.y / batch_n();
    let b = p.y % batch_n();
    let flags = U.i[1].w;
    var h: array<f32, H>;
    var c: array<f32, H>;
    for (var j = 0u; j < H; j++) {
        let e = state_elem(d, b, j);
        h[j] = select(0.0, load_elem(T2, U.t[2], e), (flags & 1) != 0);
        c[j] = select(0.0, load_elem(T3, U.t[3], e), (flags & 2) != 0);
    }
    // g[q]: h R^T of gate rows 4q..4q + 3 (gate row r = gate * H + unit)
    var g: array<vec4<f32>, H>;
    let steps = min(p.x + 1u, seq);
    for (var s = 0u; s < steps; s++) {
        for (var q = 0u; q < H; q++) {
            var a = vec4<f32>(0.0);
            for (var k = 0u; k < H; k++) {
                a += h[k] * ld(T1, k, d * H + q);
            }
            g[q] = a;
        }
        // every gate reads the previous h: only now may h change
        let row = (time_of(d, s) * dirs_n() + d) * batch_n() + b;
        for (var j = 0u; j < H; j++) {
            let ri = j;
            let ro = H + j;
            let rf = 2u * H + j;
            let rc = 3u * H + j;
            let x = ld(T0, j, row) + vec4<f32>(g[ri / 4u][ri % 4u], g[ro / 4u][ro % 4u],
                                               g[rf / 4u][rf % 4u], g[rc / 4u][rc % 4u]);
            c[j] = sigmoid_f(x.z) * c[j] + sigmoid_f(x.x) * tanh_f(x.w);
            h[j] = sigmoid_f(x.y) * tanh_f(c[j]);
        }
    }
    let last = p.x >= seq;
    var o: array<vec4<f32>, 8>;
    for (var k = 0u; k < ${P}u; k++) {
        var v = vec4<f32>(0.0);
        for (var l = 0u; l < 4u; l++) {
            let j = 4u * k + l;
            if (j < H) {
                v[l] = select(h[j], c[j], last);
            }
        }
        o[k] = v;
    }
    return outputs(o);
}

// A whole LSTM sequence in one pass (default activations), for hidden sizes H of up to 4 * P
// that are multiples of 4.
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
const HB: u32 = ${H}u / 4u;  // texels of 4 units

@group(0) @binding(1) var T0: texture_2d<f32>;
@group(0) @binding(2) var T1: texture_2d<f32>;
@group(0) @binding(3) var T2: texture_2d<f32>;
@group(0) @binding(4) var T3: texture_2d<f32>;

fn sigmoid4(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(sigmoid_f(x.x), sigmoid_f(x.y), sigmoid_f(x.z), sigmoid_f(x.w));
}

fn tanh4(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(tanh_f(x.x), tanh_f(x.y), tanh_f(x.z), tanh_f(x.w));
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> Out {
    let p = vec2<u32>(pos.xy);
    let seq = u32(U.i[0].x);
    let d = p.y / batch_n();
    let b = p.y % batch_n();
    let flags = U.i[1].w;
    // h and c of units 4m..4m + 3 in h[m], c[m]
    var h: array<vec4<f32>, HB>;
    var c: array<vec4<f32>, HB>;
    for (var j = 0u; j < H; j++) {
        let e = state_elem(d, b, j);
        h[j / 4u][j % 4u] = select(0.0, load_elem(T2, U.t[2], e), (flags & 1) != 0);
        c[j / 4u][j % 4u] = select(0.0, load_elem(T3, U.t[3], e), (flags & 2) != 0);
    }
    // g[q]: h R^T of gate rows 4q..4q + 3; with H a multiple of 4, g[gate * HB + m] holds
    // that gate of units 4m..4m + 3
    var g: array<vec4<f32>, H>;
    let rows = d * H;  // R's first texel row of direction d
    let steps = min(p.x + 1u, seq);
    for (var s = 0u; s < steps; s++) {
        for (var q = 0u; q < H; q++) {
            var a = vec4<f32>(0.0);
            for (var m = 0u; m < HB; m++) {
                let hv = h[m];
                a += hv.x * ld(T1, 4u * m, rows + q) + hv.y * ld(T1, 4u * m + 1u, rows + q)
                    + hv.z * ld(T1, 4u * m + 2u, rows + q) + hv.w * ld(T1, 4u * m + 3u, rows + q);
            }
            g[q] = a;
        }
        // every gate reads the previous h: only now may h change
        let row = (time_of(d, s) * dirs_n() + d) * batch_n() + b;
        for (var m = 0u; m < HB; m++) {
            // the input's part of gates (i, o, f, c) of units 4m..4m + 3, one texel a unit
            let x0 = ld(T0, 4u * m, row);
            let x1 = ld(T0, 4u * m + 1u, row);
            let x2 = ld(T0, 4u * m + 2u, row);
            let x3 = ld(T0, 4u * m + 3u, row);
            let gi = g[m] + vec4<f32>(x0.x, x1.x, x2.x, x3.x);
            let go = g[HB + m] + vec4<f32>(x0.y, x1.y, x2.y, x3.y);
            let gf = g[2u * HB + m] + vec4<f32>(x0.z, x1.z, x2.z, x3.z);
            let gc = g[3u * HB + m] + vec4<f32>(x0.w, x1.w, x2.w, x3.w);
            c[m] = sigmoid4(gf) * c[m] + sigmoid4(gi) * tanh4(gc);
            h[m] = sigmoid4(go) * tanh4(c[m]);
        }
    }
    var o: array<vec4<f32>, 8>;
    let last = p.x >= seq;
    for (var m = 0u; m < HB; m++) {
        o[m] = select(h[m], c[m], last);
    }
    return outputs(o);
}

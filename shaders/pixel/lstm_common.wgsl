// Helpers of the LSTM passes (lstm.wgsl, lstm_seq.wgsl, lstm_gather.wgsl), which share the
// parameter block: i[0] = (seq, batch, input, H); i[1] = (dirs, step, layout, flags);
// i[2].x: directions from this one on run backward (t = seq - 1 - step).

fn batch_n() -> u32 { return u32(U.i[0].y); }
fn dirs_n() -> u32 { return u32(U.i[1].x); }
fn batch_first() -> bool { return U.i[1].z != 0; }

// the time a direction works on at step s (the step that made time t, likewise)
fn time_of(d: u32, s: u32) -> u32 {
    return select(s, u32(U.i[0].x) - 1u - s, i32(d) >= U.i[2].x);
}

// element (d, b, j) of a [dirs, batch, H] state input ([batch, dirs, H] batch-first)
fn state_elem(d: u32, b: u32, j: u32) -> array<u32, 6> {
    if (batch_first()) {
        return array<u32, 6>(0u, 0u, 0u, b, d, j);
    }
    return array<u32, 6>(0u, 0u, 0u, d, b, j);
}

// (t, d, b) of element e of Y: [seq, dirs, batch, H], batch-first [batch, seq, dirs, H]
fn y_coords(e: array<u32, 6>) -> vec3<u32> {
    if (batch_first()) {
        return vec3<u32>(e[3], e[4], e[2]);
    }
    return vec3<u32>(e[2], e[3], e[4]);
}

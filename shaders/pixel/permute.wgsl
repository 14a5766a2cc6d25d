// Transpose, Slice and Split as a linear texel shuffle: the input element read for output
// element e is start + step * (a permutation of e), so its texture row, x and blocked-axis
// index are each a linear function of e. Per output texel that is one dot product, plus a
// constant step per component, instead of decomposing every element's index.
// i[0], i[1].xy: texture-row coefficient of output axes 0..5 (input's non-blocked axes)
// i[2], i[3].xy: x coefficient of output axes 0..5 (when the input's x is not its blocked axis)
// i[4], i[5].xy: coefficient of output axes 0..5 in the input's blocked-axis index
// i[1].zw = (row offset, texture rows per block of the input's blocked axis)
// i[3].z = x offset;  i[5].z = blocked-axis offset
// i[6] = (row, x, blocked-axis index) steps from one component of the output to the next
// BLOCKED_X: the input's blocked axis runs along x (rank <= 2).
// WHOLE: the 4 components come from one aligned input texel (copied as a whole).

const BLOCKED_X: bool = ${BLOCKED_X};
const WHOLE: bool = ${WHOLE};

@group(0) @binding(1) var X: texture_2d<f32>;

fn lin(b: array<u32, 6>, lo: vec4<i32>, hi: vec4<i32>) -> i32 {
    let a = vec4<i32>(i32(b[0]), i32(b[1]), i32(b[2]), i32(b[3]));
    return dot(a, lo) + i32(b[4]) * hi.x + i32(b[5]) * hi.y;
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    var b = texel_index(U.o, p);
    let ax = U.o.d1.z;
    b[ax] = b[ax] * 4u;
    let row0 = lin(b, U.i[0], U.i[1]) + U.i[1].z;
    let x0 = lin(b, U.i[2], U.i[3]) + U.i[3].z;
    let blk0 = lin(b, U.i[4], U.i[5]) + U.i[5].z;
    let rows_per_block = U.i[1].w;
    if (WHOLE) {
        var v = ld(X, u32(x0), u32(row0 + (blk0 / 4) * rows_per_block));
        if (BLOCKED_X) {
            v = ld(X, u32(blk0 / 4), u32(row0));
        }
        return select(vec4<f32>(0.0), v, mask_at(U.o, p));
    }
    let step = U.i[6];
    let valid = mask_at(U.o, p);
    var r = vec4<f32>(0.0);
    for (var c = 0; c < 4; c++) {
        if (valid[c]) {
            let row = row0 + c * step.x;
            let blk = blk0 + c * step.z;
            var x = x0 + c * step.y;
            var y = row + (blk / 4) * rows_per_block;
            if (BLOCKED_X) {
                x = blk / 4;
                y = row;
            }
            r[c] = ld(X, u32(x), u32(y))[blk % 4];
        }
    }
    return r;
}

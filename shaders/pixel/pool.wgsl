// Pooling over the two innermost axes of X [N, C, H, W] (1-D as H = 1); channels stay blocked.
// i[0] = (N, C, H, W)   i[1] = (C blocks, OH, OW, count_include_pad)   i[2] = (kh, kw, sh, sw)
// i[3] = (pad_top, pad_left, dh, dw)   i[4] = (pad_bottom, pad_right)   f[0].x = p (LpPool)
// Mode ${MODE}: max, avg, lp.

@group(0) @binding(1) var X: texture_2d<f32>;

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let p = vec2<u32>(pos.xy);
    let H = U.i[0].z;
    let Wd = U.i[0].w;
    let oh_n = u32(U.i[1].y);
    let ow = i32(p.x);
    let oh = i32(p.y % oh_n);
    let plane = p.y / oh_n;
    let xrow = plane * u32(H);
    let kh = U.i[2].x;
    let kw = U.i[2].y;
    let y0 = oh * U.i[2].z - U.i[3].x;
    let x0 = ow * U.i[2].w - U.i[3].y;
    var mx = vec4<f32>(-f_inf());  // a window of -Inf gives -Inf
    var sum = vec4<f32>(0.0);
    var valid = 0;
    var padded = 0;
    for (var ky = 0; ky < kh; ky++) {
        let iy = y0 + ky * U.i[3].z;
        let in_pad_y = iy >= -U.i[3].x && iy < H + U.i[4].x;
        for (var kx = 0; kx < kw; kx++) {
            let ix = x0 + kx * U.i[3].w;
            if (in_pad_y && ix >= -U.i[3].y && ix < Wd + U.i[4].y) {
                padded += 1;
            }
            if (iy < 0 || iy >= H || ix < 0 || ix >= Wd) {
                continue;
            }
            let v = ld(X, u32(ix), xrow + u32(iy));
            valid += 1;
            mx = max4(mx, v);  // a window holding a NaN gives NaN
            sum += pool_term_${MODE}(v);
        }
    }
    let r = pool_finish_${MODE}(mx, sum, select(valid, padded, U.i[1].w != 0));
    let cb = plane % u32(U.i[1].x);
    let left = U.i[0].y - i32(cb * 4u);
    return select(vec4<f32>(0.0), r, vec4<i32>(0, 1, 2, 3) < vec4<i32>(left));
}

fn pool_term_max(v: vec4<f32>) -> vec4<f32> { return vec4<f32>(0.0); }
fn pool_term_avg(v: vec4<f32>) -> vec4<f32> { return v; }
fn pool_term_lp(v: vec4<f32>) -> vec4<f32> { return pow(abs(v), vec4<f32>(U.f[0].x)); }

fn pool_finish_max(mx: vec4<f32>, sum: vec4<f32>, count: i32) -> vec4<f32> { return mx; }
fn pool_finish_avg(mx: vec4<f32>, sum: vec4<f32>, count: i32) -> vec4<f32> {
    return sum / f32(max(count, 1));
}
fn pool_finish_lp(mx: vec4<f32>, sum: vec4<f32>, count: i32) -> vec4<f32> {
    return pow(sum, vec4<f32>(1.0 / U.f[0].x));
}

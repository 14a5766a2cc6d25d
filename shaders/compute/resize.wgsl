// Bilinear Resize of the two innermost dims, with ONNX's coordinate transformations. coord:
// 0 half_pixel, 1 pytorch_half_pixel, 2 align_corners, 3 asymmetric, 4
// tf_half_pixel_for_nearest, 5 half_pixel_symmetric. (Nearest: resize_nearest.wgsl, whose
// source indices the host computes.)
struct Params {
    n: i32, H: i32, W: i32, OH: i32,
    OW: i32, pad2: i32, coord: i32, pad3: i32,
    scale_h: f32, scale_w: f32, pad0: i32, pad1: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

fn source(o: i32, len_in: i32, len_out: i32, scale: f32) -> f32 {
    let fo = f32(o);
    switch p.coord {
        case 1: { return select(0.0, (fo + 0.5) / scale - 0.5, len_out > 1); }
        // ONNX divides by the unrounded output length, scale * input length
        case 2: { return select(fo * f32(len_in - 1) / (scale * f32(len_in) - 1.0), 0.0,
                                len_out == 1); }
        case 3: { return fo / scale; }
        case 4: { return (fo + 0.5) / scale; }
        case 5: {
            let adj = f32(len_out) / (scale * f32(len_in));
            let offset = f32(len_in) * 0.5 * (1.0 - adj);
            return offset + (fo + 0.5) / scale - 0.5;
        }
        default: { return (fo + 0.5) / scale - 0.5; }
    }
}

// a + (b - a) t, leaving out a tap whose weight is 0: a NaN or an infinity there must not
// reach the output (0 * inf), as the separable weights of the CPU and the reference skip it
fn lerp(a: f32, b: f32, t: f32) -> f32 {
    return select(select(mix(a, b, t), a, t == 0.0), b, t == 1.0);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = i32(g.x + g.y * nw.x * 256u);
    if (i >= p.n) { return; }
    let ow = i % p.OW;
    let oh = (i / p.OW) % p.OH;
    let base = (i / (p.OW * p.OH)) * p.H * p.W;
    let sy = source(oh, p.H, p.OH, p.scale_h);
    let sx = source(ow, p.W, p.OW, p.scale_w);
    let cy = clamp(sy, 0.0, f32(p.H - 1));
    let cx = clamp(sx, 0.0, f32(p.W - 1));
    let y0 = i32(floor(cy));
    let x0 = i32(floor(cx));
    let y1 = min(y0 + 1, p.H - 1);
    let x1 = min(x0 + 1, p.W - 1);
    let fy = cy - f32(y0);
    let fx = cx - f32(x0);
    let top = lerp(x[base + y0 * p.W + x0], x[base + y0 * p.W + x1], fx);
    let bottom = lerp(x[base + y1 * p.W + x0], x[base + y1 * p.W + x1], fx);
    y[i] = lerp(top, bottom, fy);
}

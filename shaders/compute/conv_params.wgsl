// The parameter block of the convolution shaders (kernels_conv._params packs it): input
// C, H, W and output M, OH, OW; kernel, strides, pads, dilations; channels per group; then
// `last` (conv2d/conv_direct: M rounded up to 4; the transposed convolutions: the output
// size), whether there is a bias, and the fused activation's two parameters.
struct Params {
    C: i32, H: i32, W: i32, M: i32,
    OH: i32, OW: i32, KH: i32, KW: i32,
    sh: i32, sw: i32, ph: i32, pw: i32,
    dh: i32, dw: i32, Cg: i32, Mg: i32,
    last: i32, has_bias: i32, act_a: f32, act_b: f32,
}

// The parameter block of copy.wgsl and copy_elem.wgsl (kernels_movement.strided_copy):
// n invocations' worth of work, the iteration shape, input and output strides, and the
// moduli m of a broadcast (Expand, Tile) per dim.
struct Params {
    n: i32, rank: i32, in_base: i32, out_base: i32,
    inner: i32, chunks: i32, pad0: i32, pad1: i32,
    shape: array<vec4<i32>, 2>,
    si: array<vec4<i32>, 2>,
    so: array<vec4<i32>, 2>,
    m: array<vec4<i32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;

// Parameters and bindings of rownorm.wgsl and rownorm_rows.wgsl (kernels_norm.rownorm):
// rows of length L, eps, and whether to write each row's (mean, 1 / std) to stats.
struct Params { rows: i32, L: i32, sm: i32, sd: i32, eps: f32, stats: i32, pad0: i32, pad1: i32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> scale: array<f32>;
@group(0) @binding(3) var<storage, read> shift: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;

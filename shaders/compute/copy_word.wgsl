// copy.wgsl's elements: single 32-bit words
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

// copy.wgsl's elements: aligned groups of 4 words, one load and one store each
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<u32>>;

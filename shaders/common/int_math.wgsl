// Integer helpers. WGSL's `%` on i32 is C's remainder, but a driver was seen computing it
// for negative operands as if they were unsigned (NVIDIA's Vulkan driver: -20 % 3 gave 2):
// the remainder is taken of the magnitudes, whose `%` is unsigned by type.

// C's remainder: the dividend's sign (abs of i32's minimum is itself, 2^31 as u32)
fn rem_i32(a: i32, b: i32) -> i32 {
    let r = i32(u32(abs(a)) % u32(abs(b)));
    return select(r, -r, a < 0);
}

// the remainder in [0, |b|), for wrapping an index
fn wrap_i32(a: i32, b: i32) -> i32 {
    let r = rem_i32(a, b);
    return select(r, r + abs(b), r < 0);
}

"""Gemm and MatMul on the register-blocked matmul shader (batched, with fused bias/activation).

``matmul`` picks the shader's load forms from the operands' strides: vec4 loads along K for
A, along N ("outer" product form) or along K ("dot" form) for B, scalar loads otherwise. A B
operand larger than one storage binding (VGG's first FC layer) is split along N into chunks
that each fit, when its rows along N are contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, current_limits, gpu_kernel, out_size_reason
from engine.backends.gpu_compute.util import broadcast_strides, size_of, whole16
from engine.ops.activations import UNARY_OPS, fused_params, shader_params


@dataclass
class Operand:
    """A matrix view: element (r, c) of batch b at off + b*batch + r*sr + c*sc."""

    tensor: object
    sr: int
    sc: int
    batch: int = 0
    off: int = 0


def _aligned(*values: int) -> bool:
    return all(v % 4 == 0 for v in values)


def fused_activation(layer) -> tuple[str, tuple[float, float, float]]:
    """(op name in shaders/common/activations.wgsl, params) of a layer's fused activation
    (Identity if none)."""
    op = layer.attr("activation")
    if not op:
        return "Identity", (0.0, 0.0, 0.0)
    return op, shader_params(fused_params(op, layer.attr("activation_params")))


def activation_reason(layer) -> str | None:
    op = layer.attr("activation")
    rec = UNARY_OPS.get(op) if op else None
    if op and (rec is None or not rec.shader):
        return f"fused activation {op} has no GPU epilogue"
    return None


#: A_LOAD, B_LOAD and C_STORE values of matmul.wgsl (files compute/matmul_a_*.wgsl,
#: matmul_b_*.wgsl, matmul_c_*.wgsl)
A_LOADS = ("vec4", "scalar")
B_LOADS = ("dot_vec4", "dot_scalar", "outer_vec4", "outer_shift", "outer_scalar")
C_STORES = ("vec4", "scalar")


def workgroup_for(M: int, N: int = 0, batch: int = 1) -> tuple[int, int]:
    """matmul.wgsl's workgroup shape (invocations along N, along M; 4x4 outputs each), 64
    invocations: the tallest of 8x8, 16x4, 32x2 and 64x1 whose rows past M waste at most an
    eighth of the invocation rows (8x8 over M = 8 left three quarters idle), as long as the
    dispatch keeps at least MIN_GROUPS workgroups (a 1-row Gemm over 768 columns would run
    as 3); 8x8 otherwise."""
    rows = -(-M // 4)
    for wgy in WG_ROWS:
        wgx = 64 // wgy
        groups = -(-N // (4 * wgx)) * -(-rows // wgy) * batch
        if -(-rows // wgy) * wgy - rows <= rows // 8 and (not N or groups >= MIN_GROUPS):
            return wgx, wgy
    return 8, 8


#: invocation rows of matmul.wgsl's workgroup shapes, tallest first
WG_ROWS = (8, 4, 2, 1)
#: fewest workgroups of a matmul dispatch (2 per thread of a 2-core CPU adapter) for which a
#: shorter workgroup shape is chosen
MIN_GROUPS = 4


def program_for(a: Operand, b: Operand, M: int, N: int, K: int, act: str,
                c_vec: bool = False, batch: int = 1) -> Program:
    """matmul.wgsl with the operands' load forms: vec4 loads where a layout allows them; B in
    the dot-product form when contiguous along K, else the outer-product form; vec4 stores of
    C when ``c_vec`` (N, its row stride and offsets are multiples of 4)."""
    # the K loop's vec4 steps stop at K - K % 4; the rest are scalar loads
    a_vec = a.sc == 1 and _aligned(a.sr, a.batch, a.off)
    if b.sr == 1 and b.sc != 1:  # contiguous along K
        form, vec = "dot", K % 4 == 0 and _aligned(b.sc, b.batch, b.off)
    else:  # contiguous along N (or neither); rows padded to a multiple of 4 also take vec4
        # loads (the columns past N they read are never stored)
        form, vec = "outer", b.sc == 1 and (N % 4 == 0 or b.sr >= -(-N // 4) * 4) and \
            _aligned(b.sr, b.batch, b.off)
    load = "vec4" if vec else "scalar"
    if form == "outer" and not vec and b.sc == 1 and whole16(b.tensor):
        load = "shift"  # two aligned vec4 loads rather than four scalar ones
    wgx, wgy = workgroup_for(M, N, batch)
    return Program.of("matmul.wgsl", act=act, WGX=wgx, WGY=wgy,
                      A_LOAD="vec4" if a_vec else "scalar",
                      B_LOAD=f"{form}_{load}",
                      C_STORE="vec4" if c_vec else "scalar")


def matmul(ctx, a: Operand, b: Operand, y, M: int, N: int, K: int, batch: int = 1,
           bias: Operand | None = None, alpha: float = 1.0, beta: float = 1.0,
           act=("Identity", (0.0, 0.0, 0.0)), ldc: int | None = None, c_off: int = 0,
           c_batch: int | None = None) -> None:
    """Record y[b, m, n] = act(alpha * sum_k A(m, k) B(k, n) + beta * bias(m, n))."""
    if not (M and N and batch):
        return
    op, (pa, pb, _) = act
    ldc = N if ldc is None else ldc
    c_batch = M * N if c_batch is None else c_batch
    if ctx.matmul_variant == "tiled":
        program, groups = Program.of("matmul_tiled.wgsl", act=op), (-(-N // 64), -(-M // 64),
                                                                      batch)
    else:
        c_vec = _aligned(N, ldc, c_off, c_batch if batch > 1 else 0)
        wgx, wgy = workgroup_for(M, N, batch)
        program = program_for(a, b, M, N, K, op, c_vec, batch)
        groups = (-(-N // (4 * wgx)), -(-M // (4 * wgy)), batch)
    bias_t = bias.tensor if bias is not None else a.tensor
    bias = bias or Operand(None, 0, 0)
    params = pack(M, N, K, int(bias.tensor is not None), a.sr, a.sc, b.sr, b.sc,
                  a.batch, b.batch, c_batch, bias.batch, float(alpha), float(beta),
                  float(pa), float(pb), bias.sr, bias.sc, a.off, b.off,
                  ldc, c_off, bias.off, 0)
    ctx.dispatch(program, [a.tensor, b.tensor, bias_t, y], params, groups)


# -- Gemm ------------------------------------------------------------------------------------
def _gemm_check(layer, metas):
    reason = activation_reason(layer)
    if reason or metas[0] is None or metas[1] is None:
        return reason
    a, b = metas[0], metas[1]
    if len(a.shape) != 2 or len(b.shape) != 2:
        return "Gemm needs 2-D inputs"
    if any(m is not None and m.dtype != np.float32 for m in metas):
        return "Gemm runs on float32 on the GPU"
    M = a.shape[1] if layer.attr("transA", 0) else a.shape[0]
    N = b.shape[0] if layer.attr("transB", 0) else b.shape[1]
    if isinstance(M, int) and isinstance(N, int):
        reason = out_size_reason(M * N * 4)
        if reason:
            return reason
    if b.size * 4 > current_limits().max_binding and not layer.attr("transB", 0):
        return "B exceeds one storage binding and is not laid out to split along N"
    return None


@gpu_kernel("Gemm", dtypes=F32, inputs=(0,), check=_gemm_check, big_ok=(1,))
def Gemm(ctx, layer, ins, metas, out_metas):
    ma, mb = metas[0], metas[1]
    ta, tb = layer.attr("transA", 0), layer.attr("transB", 0)
    M, K = (ma.shape[1], ma.shape[0]) if ta else ma.shape
    N = mb.shape[0] if tb else mb.shape[1]
    a = Operand(ins[0], 1, M) if ta else Operand(ins[0], K, 1)
    y = ctx.tensor(out_metas[0])
    bias = None
    if len(ins) > 2 and ins[2] is not None and layer.attr("beta", 1.0) != 0.0:
        st = broadcast_strides(metas[2].shape, (M, N))
        bias = Operand(ins[2], st[0], st[1])
    alpha, beta, act = layer.attr("alpha", 1.0), layer.attr("beta", 1.0), fused_activation(layer)
    if not tb:
        matmul(ctx, a, Operand(ins[1], N, 1), y, M, N, K, 1, bias, alpha, beta, act)
        return [y]
    # rows of B are output columns: bind at most one storage binding's worth at a time
    rows = max(64, (ctx.limits.max_binding // (K * 4)) // 64 * 64)
    for n0 in range(0, N, rows):
        n = min(rows, N - n0)
        bview = (ins[1], n0 * K * 4, n * K * 4)
        part = None if bias is None else Operand(bias.tensor, bias.sr, bias.sc,
                                                 off=n0 * bias.sc)
        matmul(ctx, a, Operand(bview, 1, K), y, M, n, K, 1, part, alpha, beta, act,
               ldc=N, c_off=n0)
    return [y]


# -- MatMul ----------------------------------------------------------------------------------
def _batch_plan(sa, sb):
    """(batch count, a batch stride, b batch stride) or None if broadcasting is too general."""
    ba, bb = tuple(sa[:-2]), tuple(sb[:-2])
    out = tuple(np.broadcast_shapes(ba, bb))
    count = size_of(out)
    strides = []
    for shape, mat in ((ba, sa[-2] * sa[-1]), (bb, sb[-2] * sb[-1])):
        full = (1,) * (len(out) - len(shape)) + shape
        if full == out:
            strides.append(mat)
        elif size_of(shape) == 1:
            strides.append(0)
        else:
            return None
    return count, strides[0], strides[1]


def _mm_shapes(ma, mb):
    sa = tuple(ma.shape) if len(ma.shape) > 1 else (1,) + tuple(ma.shape)
    sb = tuple(mb.shape) if len(mb.shape) > 1 else tuple(mb.shape) + (1,)
    return sa, sb


def _matmul_check(layer, metas):
    ma, mb = metas[0], metas[1]
    if ma is None or mb is None:
        return None
    if ma.dtype != np.float32 or mb.dtype != np.float32:
        return "MatMul runs on float32 on the GPU"
    if not ma.shape or not mb.shape:
        return "MatMul of a scalar"
    if not all(isinstance(d, int) for d in ma.shape + mb.shape):
        return None
    sa, sb = _mm_shapes(ma, mb)
    if _batch_plan(sa, sb) is None:
        return "MatMul with batch dims broadcast on both sides runs on the CPU"
    return None


@gpu_kernel("MatMul", dtypes=F32, inputs=(0, 1), check=_matmul_check)
def MatMul(ctx, layer, ins, metas, out_metas):
    # an attention chain from here on, or its end (``attention``): one fused dispatch
    fused = ctx.attention.defer(ctx, layer, ins, metas, out_metas[0]) or \
        ctx.attention.finish(ctx, layer, ins, out_metas[0])
    if fused is not None:
        return [fused]
    sa, sb = _mm_shapes(metas[0], metas[1])
    M, K, N = sa[-2], sa[-1], sb[-1]
    count, a_batch, b_batch = _batch_plan(sa, sb)
    y = ctx.tensor(out_metas[0])
    if K == 0:
        from engine.backends.gpu_compute.kernels_shape import fill

        fill(ctx, y, out_metas[0], 0.0)
        return [y]
    if b_batch == 0 and count > 1:
        # a shared B (x @ W over [..., rows, K]): the batches of A and C are contiguous rows,
        # so one matmul of count * M rows fills whole tiles instead of count thin ones
        M, count = M * count, 1
    bias, alpha, act = None, 1.0, ("Identity", (0.0, 0.0, 0.0))
    taken = ctx.epilogues.take(ctx, layer, out_metas[0])
    if taken is not None:  # the scale, bias Add and activation after it, in this dispatch
        if taken.bias is not None:
            row = ctx.named_constant(taken.bias, "row",
                                     lambda v: np.ascontiguousarray(v.reshape(-1)))
            bias = Operand(row, 0, 0 if row.shape[0] == 1 else 1)
        alpha, act = taken.alpha, taken.activation()
    matmul(ctx, Operand(ins[0], K, 1, a_batch), Operand(ins[1], N, 1, b_batch), y, M, N, K,
           count, bias, alpha=alpha, act=act)
    return [y]

"""Unary elementwise kernels: maths, activations (also fused into Conv/Gemm), Identity, Dropout."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.backends.gpu_compute.util import f32_value, size_of
from engine.ops.activations import FLT_MAX, UNARY_OPS, layer_params, shader_ops, shader_params

WG = 256
I32 = (np.dtype(np.int32),)
F32_I32 = F32 + I32
INTS = (np.dtype(np.int32), np.dtype(np.uint32))
BOOL = (np.dtype(bool),)
WGSL_TYPE = {"float32": "f32", "int32": "i32", "uint32": "u32", "bool": "u32"}


def run_unary(ctx, x, out_meta, op: str, t: str, u: str, params=(0.0, 0.0, 0.0)):
    """y = op_<op>(x) with the function of shaders/common/activations.wgsl (or
    compute/cast.wgsl) named by ``op``; ``t``/``u`` are the WGSL element types."""
    y = ctx.tensor(out_meta)
    n = size_of(out_meta.shape)
    if n:
        a, b, c = (float(v) for v in (tuple(params) + (0.0, 0.0, 0.0))[:3])
        if n % 4 == 0 and t == u == "f32":
            ctx.dispatch(Program.of("unary_vec4.wgsl", OP=op), [x, y], pack(n, a, b, c),
                         -(-n // 256))
        else:
            ctx.dispatch(Program.of("unary.wgsl", T=t, U=u, OP=op), [x, y],
                         pack(n, a, b, c), -(-n // WG))
    return y


def _wgsl(meta) -> str:
    return WGSL_TYPE[np.dtype(meta.dtype).name]


def _register_unary(op: str, dtypes, out: str | None = None):
    """A kernel for unary op ``op`` (record in engine.ops.activations): op_<op> on float32,
    op_<op>_<type> on the other types of ``dtypes``."""
    rec = UNARY_OPS[op]

    @gpu_kernel(op, dtypes=dtypes, check=(lambda layer, metas: rec.unsupported(layer))
                if rec.choices else None)
    def kernel(ctx, layer, ins, metas, out_metas):
        t = _wgsl(metas[0])
        fn = op if t == "f32" else f"{op}_{t}"
        return [run_unary(ctx, ins[0], out_metas[0], fn, t, out or t,
                          shader_params(layer_params(layer)))]

    kernel.__name__ = op


for _rec in shader_ops():
    if _rec.name != "Clip":  # bounds from inputs: below
        _register_unary(_rec.name, F32_I32 if _rec.ints else F32)
_register_unary("Not", BOOL)
_register_unary("BitwiseNot", INTS)
_register_unary("IsNaN", F32, out="u32")
_register_unary("IsInf", F32, out="u32")


def _clip_bounds(layer, metas):
    if layer.opset and layer.opset < 11:
        return float(layer.attr("min", -FLT_MAX)), float(layer.attr("max", FLT_MAX))
    lo = f32_value(metas[1] if len(metas) > 1 else None, -FLT_MAX)
    hi = f32_value(metas[2] if len(metas) > 2 else None, FLT_MAX)
    return lo, hi


def _clip_check(layer, metas):
    lo, hi = _clip_bounds(layer, metas)
    if lo is None or hi is None:
        return "Clip bounds computed on the device are not supported (need CPU-known min/max)"
    return None


@gpu_kernel("Clip", dtypes=F32, check=_clip_check)
def Clip(ctx, layer, ins, metas, out_metas):
    lo, hi = _clip_bounds(layer, metas)
    lo, hi = max(lo, -FLT_MAX), min(hi, FLT_MAX)
    return [run_unary(ctx, ins[0], out_metas[0], "Clip", "f32", "f32", (lo, hi, 0))]


def _identity(ctx, layer, ins, metas, out_metas):
    return [ctx.view(ins[0], out_metas[0].shape)]


def _identity_check(layer, metas):
    if not metas or metas[0] is None:
        return "Identity of an empty optional or unknown value runs on the CPU"
    return None


gpu_kernel("Identity", dtypes=None, inputs=None, check=_identity_check)(_identity)


def _dropout_check(layer, metas):
    training = metas[2] if len(metas) > 2 else None
    if training is not None and (training.value is None or bool(np.asarray(training.value))):
        return "Dropout in training mode runs on the CPU"
    if layer.attr("is_test", 1) == 0:
        return "Dropout in training mode runs on the CPU"
    return None


@gpu_kernel("Dropout", dtypes=None, inputs=(0,), check=_dropout_check)
def Dropout(ctx, layer, ins, metas, out_metas):
    """Inference: the identity, and a mask of all True when one is asked for."""
    outs = [ctx.view(ins[0], out_metas[0].shape)]
    if len(out_metas) > 1:
        from engine.backends.gpu_compute.kernels_shape import fill

        mask = ctx.tensor(out_metas[1])
        fill(ctx, mask, out_metas[1], True)
        outs.append(mask)
    return outs

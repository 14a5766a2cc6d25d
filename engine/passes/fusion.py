"""Import-time fusion: fold BatchNormalization and per-channel Mul/Add into Conv weights, fold
per-channel Mul/Add into a BatchNormalization, fuse an activation into Conv/Gemm (SiLU as
exporters write it, Sigmoid then Mul by the same input, as the activation Swish; HardSwish
and HardSigmoid written out with Add/Clip/Mul/Div: ``fusion_hswish``), fold a
constant per-column scale after a MatMul (and its bias) into its weights (``fusion_scale``),
turn 2-D MatMul+Add into Gemm.

A layer with a fused activation keeps its ONNX op type (``Conv``/``Gemm``) and gets the
attributes ``activation`` (the ONNX op name, e.g. ``"Relu"``) and ``activation_params``
(floats in the order of the op's record in ``engine.ops.activations``); every backend's Conv
and Gemm kernels apply it to their result.
A pair is fused only when the intermediate tensor is not a graph output and has exactly one
consumer. Weights are rewritten into new constants, so shared weights stay intact.
"""

from __future__ import annotations

import numpy as np

from engine.model import Layer, Model
from engine.ops.activations import ACTIVATIONS
from engine.passes.fusion_hswish import fuse_written_out
from engine.passes.fusion_scale import fold_column_scale


def apply_activation(y: np.ndarray, name: str | None, params) -> np.ndarray:
    """Reference semantics of a fused activation (NumPy; used by tests and fallbacks)."""
    if not name:
        return y
    p = list(params or [])
    if name == "Relu":
        return np.maximum(y, 0)
    if name == "LeakyRelu":
        return np.where(y >= 0, y, y * p[0])
    if name == "Clip":  # absent bounds are the type's lowest()/max(): -Inf/+Inf are clipped
        lo, hi = p[0], p[1]
        if y.dtype.kind == "f":
            info = np.finfo(y.dtype)
            lo, hi = max(lo, float(info.min)), min(hi, float(info.max))
        return np.clip(y, lo, hi)
    if name == "Sigmoid":
        return 1 / (1 + np.exp(-y))
    if name == "HardSigmoid":
        return np.clip(y * p[0] + p[1], 0, 1)
    if name == "Tanh":
        return np.tanh(y)
    if name == "HardSwish":
        return y * np.clip(y / 6 + 0.5, 0, 1)
    if name == "Swish":
        return y / (1 + np.exp(-p[0] * y))
    raise ValueError(f"unknown fused activation {name!r}")


class _Fuser:
    def __init__(self, model: Model):
        self.m = model
        self.outputs = {o.name for o in model.outputs}
        self.counts = {"conv_bn": 0, "conv_affine": 0, "bn_affine": 0, "activation": 0,
                       "matmul_add": 0, "matmul_scale": 0, "hard_activation": 0}
        self.removed: set[int] = set()
        self._index()

    def _index(self) -> None:
        self.producer: dict[str, Layer] = {}
        self.users: dict[str, list[Layer]] = {}
        for layer in self.m.layers:
            for o in layer.outputs:
                if o:
                    self.producer[o] = layer
            for i in layer.all_inputs():
                if i:
                    self.users.setdefault(i, []).append(layer)

    # -- helpers --------------------------------------------------------------------------
    def sole_user(self, name: str) -> Layer | None:
        users = self.users.get(name, [])
        if name in self.outputs or len(users) != 1 or id(users[0]) in self.removed:
            return None
        return users[0]

    def const(self, name: str) -> np.ndarray | None:
        """Value of a constant tensor, also through a chain of layers on constants only."""
        if not name:
            return None
        if name in self.m.constants:
            return np.asarray(self.m.constants[name])
        layer = self.producer.get(name)
        if layer is None or layer.captures or layer.op_type not in (
                "Unsqueeze", "Reshape", "Identity", "Squeeze", "Flatten", "Cast", "Constant"):
            return None
        args = [self.const(i) if i else None for i in layer.inputs]
        if any(a is None for a, i in zip(args, layer.inputs) if i):
            return None
        from engine.backends.cpu.interpreter import run_layer

        try:
            value = run_layer(layer, args)[layer.outputs.index(name)]
        except Exception:
            return None
        return np.asarray(value)

    def new_const(self, base: str, value: np.ndarray) -> str:
        name, k = f"{base}__fused", 0
        while name in self.m.constants or name in self.producer:
            k += 1
            name = f"{base}__fused{k}"
        self.m.constants[name] = value
        return name

    def bypass(self, first: Layer, second: Layer) -> None:
        """``second`` is absorbed into ``first``: first now writes second's output."""
        getattr(self.m, "fused_away", {})[first.outputs[0]] = first.name
        first.outputs[0] = second.outputs[0]
        self.removed.add(id(second))
        self.producer[second.outputs[0]] = first

    # -- folds ----------------------------------------------------------------------------
    def channel_vector(self, value: np.ndarray | None, channels: int, rank: int
                       ) -> np.ndarray | None:
        """A per-channel (axis 1) operand as a (channels,) float64 vector, or None."""
        if value is None or value.dtype.kind != "f" or value.ndim > rank:
            return None
        shape = (1,) * (rank - value.ndim) + value.shape
        if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
            return None
        return np.broadcast_to(value.reshape(-1).astype(np.float64), (channels,)).copy()

    def conv_weights(self, conv: Layer):
        w = self.const(conv.inputs[1])
        if w is None or w.dtype.kind != "f" or conv.attr("activation"):
            return None
        b = self.const(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        if len(conv.inputs) > 2 and conv.inputs[2] and b is None:
            return None
        return w, (np.zeros(w.shape[0]) if b is None else b.astype(np.float64))

    def set_conv(self, conv: Layer, w: np.ndarray, b: np.ndarray, dtype) -> None:
        conv.inputs[1] = self.new_const(conv.inputs[1], w.astype(dtype))
        bname = self.new_const(conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2]
                               else f"{conv.name}_bias", b.astype(dtype))
        conv.inputs[:] = conv.inputs[:2] + [bname]

    def fold_into_conv(self, conv: Layer) -> bool:
        nxt = self.sole_user(conv.outputs[0])
        if nxt is None or len(conv.outputs) != 1:
            return False
        wb = self.conv_weights(conv)
        if wb is None:
            return False
        w, b = wb
        M = w.shape[0]
        rank = len(w.shape)
        if nxt.op_type == "BatchNormalization" and nxt.inputs[0] == conv.outputs[0]:
            if nxt.attr("training_mode", 0) or len([o for o in nxt.outputs if o]) != 1:
                return False
            p = [self.const(n) for n in nxt.inputs[1:5]]
            if any(v is None or v.shape != (M,) for v in p):
                return False
            gamma, beta, mean, var = (v.astype(np.float64) for v in p)
            scale = gamma / np.sqrt(var + float(nxt.attr("epsilon", 1e-5)))
            shift = beta - mean * scale
            key = "conv_bn"
        elif nxt.op_type in ("Mul", "Add") and conv.outputs[0] in nxt.inputs[:2]:
            other = nxt.inputs[1] if nxt.inputs[0] == conv.outputs[0] else nxt.inputs[0]
            vec = self.channel_vector(self.const(other), M, rank)
            if vec is None:
                return False
            scale, shift = (vec, np.zeros(M)) if nxt.op_type == "Mul" else (np.ones(M), vec)
            key = "conv_affine"
        else:
            return False
        w2 = w.astype(np.float64) * scale.reshape((M,) + (1,) * (rank - 1))
        self.set_conv(conv, w2, b * scale + shift, w.dtype)
        self.bypass(conv, nxt)
        self.counts[key] += 1
        return True

    def fold_into_bn(self, bn: Layer) -> bool:
        if bn.attr("training_mode", 0) or len([o for o in bn.outputs if o]) != 1:
            return False
        nxt = self.sole_user(bn.outputs[0])
        if nxt is None or nxt.op_type not in ("Mul", "Add") or bn.outputs[0] not in nxt.inputs:
            return False
        p = [self.const(n) for n in bn.inputs[1:5]]
        if any(v is None or v.ndim != 1 for v in p):
            return False
        C = p[0].shape[0]
        other = nxt.inputs[1] if nxt.inputs[0] == bn.outputs[0] else nxt.inputs[0]
        spec = self.m.spec(bn.inputs[0])
        rank = len(spec.shape) if spec is not None and spec.shape is not None else 4
        vec = self.channel_vector(self.const(other), C, rank)
        if vec is None:
            return False
        gamma, beta = p[0].astype(np.float64), p[1].astype(np.float64)
        if nxt.op_type == "Mul":
            gamma, beta = gamma * vec, beta * vec
        else:
            beta = beta + vec
        bn.inputs[1] = self.new_const(bn.inputs[1], gamma.astype(p[0].dtype))
        bn.inputs[2] = self.new_const(bn.inputs[2], beta.astype(p[1].dtype))
        self.bypass(bn, nxt)
        self.counts["bn_affine"] += 1
        return True

    def fuse_activation(self, layer: Layer) -> bool:
        if layer.attr("activation") or len(layer.outputs) != 1:
            return False
        if self.fuse_silu(layer):
            return True
        nxt = self.sole_user(layer.outputs[0])
        if nxt is None or nxt.op_type not in ACTIVATIONS or nxt.inputs[0] != layer.outputs[0]:
            return False
        params = [float(v) for v in ACTIVATIONS[nxt.op_type].attr_values(nxt)]
        if nxt.op_type == "Swish" and params != [1.0]:
            return False  # the epilogues compute SiLU, x * sigmoid(x)
        if nxt.op_type == "Clip" and len(nxt.inputs) > 1:
            for k, name in enumerate(nxt.inputs[1:3]):
                if name:
                    v = self.const(name)
                    if v is None or v.size != 1:
                        return False
                    params[k] = float(v.reshape(-1)[0])
        layer.attributes["activation"] = nxt.op_type
        layer.attributes["activation_params"] = params
        self.bypass(layer, nxt)
        self.counts["activation"] += 1
        return True

    def fuse_silu(self, layer: Layer) -> bool:
        """y -> Sigmoid -> Mul(y, sigmoid) as exporters write SiLU: the activation Swish."""
        y = layer.outputs[0]
        users = self.users.get(y, [])
        if y in self.outputs or len(users) != 2 or any(id(u) in self.removed for u in users):
            return False
        sig = next((u for u in users if u.op_type == "Sigmoid"), None)
        mul = next((u for u in users if u.op_type == "Mul"), None)
        if sig is None or mul is None or self.sole_user(sig.outputs[0]) is not mul or \
                sorted(mul.inputs) != sorted([y, sig.outputs[0]]):
            return False
        layer.attributes["activation"] = "Swish"
        layer.attributes["activation_params"] = [1.0]
        self.removed.add(id(sig))
        self.bypass(layer, mul)
        self.counts["activation"] += 1
        return True

    def matmul_add(self, mm: Layer) -> bool:
        nxt = self.sole_user(mm.outputs[0])
        if nxt is None or nxt.op_type != "Add":
            return False
        a, b = (self.m.spec(n) for n in mm.inputs[:2])
        if a is None or b is None or a.shape is None or b.shape is None:
            return False
        if len(a.shape) != 2 or len(b.shape) != 2:
            return False
        other = nxt.inputs[1] if nxt.inputs[0] == mm.outputs[0] else nxt.inputs[0]
        c = self.const(other)
        if c is None or c.ndim > 2 or c.dtype.kind != "f":
            return False
        n = b.shape[1]
        if c.ndim and c.shape[-1] not in (1, n) or (c.ndim == 2 and c.shape[0] != 1):
            return False  # keep to biases broadcast along rows, valid for any M
        mm.op_type = "Gemm"
        mm.inputs[:] = mm.inputs[:2] + [self.new_const(other, c)]
        mm.attributes.update(alpha=1.0, beta=1.0, transA=0, transB=0)
        self.bypass(mm, nxt)
        self.counts["matmul_add"] += 1
        return True

    def run(self) -> dict[str, int]:
        # first, before a fold can take the "+ 3" of a written-out HardSigmoid into a bias
        for layer in self.m.layers:
            if id(layer) not in self.removed and layer.domain in ("", "ai.onnx"):
                fuse_written_out(self, layer)
        for layer in self.m.layers:
            if id(layer) in self.removed or layer.domain not in ("", "ai.onnx"):
                continue
            if layer.op_type == "MatMul":
                fold_column_scale(self, layer)
                self.matmul_add(layer)
            if layer.op_type == "Conv":
                while self.fold_into_conv(layer):
                    pass
            if layer.op_type == "BatchNormalization":
                while self.fold_into_bn(layer):
                    pass
            if layer.op_type in ("Conv", "Gemm"):
                self.fuse_activation(layer)
        self.m.layers[:] = [x for x in self.m.layers if id(x) not in self.removed]
        self._drop_dead()
        return self.counts

    def _drop_dead(self) -> None:
        """Remove constants and constant-only layers that the folds left without users."""
        needed = {o.name for o in self.m.outputs}
        kept = []
        for layer in reversed(self.m.layers):
            outs = [o for o in layer.outputs if o]
            if layer.op_type in ("Unsqueeze", "Reshape", "Identity", "Squeeze", "Cast",
                                 "Constant") and not any(o in needed for o in outs) \
                    and all(i in self.m.constants for i in layer.inputs if i):
                continue
            kept.append(layer)
            needed.update(i for i in layer.all_inputs() if i)
        self.m.layers[:] = kept[::-1]
        for name in [n for n in self.m.constants if n not in needed]:
            del self.m.constants[name]


def fuse(model: Model) -> dict[str, int]:
    """Fuse in place; returns how many of each fusion were made."""
    return _Fuser(model).run()

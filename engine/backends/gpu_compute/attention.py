"""Attention on GPU_COMPUTE as one dispatch (``shaders/compute/attention.wgsl``).

Exporters write attention as MatMul(Q, K^T), a scale (Div or Mul by a scalar constant), an
optional mask (Add of a float mask, or Where(keep, scores, fill)), Softmax over the last
axis and MatMul(P, V). Run layer by layer, the [..., L, M] scores go through memory four
times; a 1500-token encoder's attention was 64% of its GPU time that way. The chains are
found once per model (``find``). When the scores' MatMul is recorded and the whole chain
can run here with the plan's shapes (``AttentionTable.defer``), it records nothing and
returns a pending tensor that holds Q and K^T; the scale, mask and Softmax layers record
nothing either (their outputs are views of it, the mask is held too); the second MatMul
records the fused dispatch (``finish``), so the chain's time is reported on it. A pending
tensor has no buffer: nothing but the chain may read it, which the checks at ``defer``
guarantee (every layer of the chain placed here and supported with the plan's metadata,
none of its tensors captured or a model output).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.backends.base import BackendType
from engine.backends.gpu_common.epilogues import sole_readers
from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.memory import Allocation, GpuTensor
from engine.backends.gpu_compute.pipelines import Program
from engine.errors import KernelError
from engine.model import Layer
from engine.ops.base import Meta

_ONNX = ("", "ai.onnx")
MASK_NONE, MASK_ADD, MASK_KEEP = 0, 1, 2
#: largest head size (of Q/K and of V): the shader keeps a query row's Q and four rows of
#: output in private arrays of this many values
MAX_HEAD = 128
#: invocations per workgroup (4 query rows each): on lavapipe 16 ran whisper's 4 x 1500 x
#: 1500 heads as fast as 64 and ViT's 3 x 197 faster (more workgroups for the threads)
WORKGROUP = 16


@dataclass(frozen=True)
class Chain:
    """The layers of one attention: ``scores`` MatMul(Q, K^T), an optional ``scale`` layer
    (by the scalar constant ``scale_const``), an optional ``mask`` layer (``mode`` MASK_ADD
    or MASK_KEEP; the mask is its input ``mask_input``, a Where's fill its constant
    ``fill_const``), the ``softmax`` and the ``out`` MatMul(P, V)."""

    scores: Layer
    scale: Layer | None
    scale_const: str
    mask: Layer | None
    mode: int
    mask_input: int
    fill_const: str
    softmax: Layer
    out: Layer

    def middle(self) -> list[Layer]:
        return [x for x in (self.scale, self.mask, self.softmax) if x is not None]


def _scalar_const(constants, name: str) -> bool:
    value = constants.get(name)
    return isinstance(value, np.ndarray) and value.size == 1 and value.dtype == np.float32


def find(model) -> dict[int, Chain]:
    """The attention chain starting at each MatMul of ``model`` that starts one, by ``id``."""
    constants = model.constants
    reader = sole_readers(model)

    def sole_user(name: str, *op_types: str) -> Layer | None:
        layer = reader(name)
        plain = layer is not None and layer.domain in _ONNX and len(layer.outputs) == 1
        return layer if plain and layer.op_type in op_types else None

    chains: dict[int, Chain] = {}
    for layer in model.layers:
        if layer.op_type != "MatMul" or layer.domain not in _ONNX or len(layer.inputs) != 2:
            continue
        y = layer.outputs[0]
        scale = mask = None
        scale_const = fill_const = ""
        mode, mask_input = MASK_NONE, -1
        nxt = sole_user(y, "Mul", "Div", "Add", "Where", "Softmax")
        if nxt is not None and nxt.op_type in ("Mul", "Div"):
            other = [n for n in nxt.inputs if n != y]
            if len(nxt.inputs) != 2 or len(other) != 1 or not _scalar_const(constants, other[0]) \
                    or (nxt.op_type == "Div" and nxt.inputs[0] != y):
                continue
            scale, scale_const, y = nxt, other[0], nxt.outputs[0]
            nxt = sole_user(y, "Add", "Where", "Softmax")
        if nxt is not None and nxt.op_type == "Add" and len(nxt.inputs) == 2 \
                and nxt.inputs.count(y) == 1:
            mask, mode, mask_input = nxt, MASK_ADD, 1 - nxt.inputs.index(y)
        elif nxt is not None and nxt.op_type == "Where":
            if len(nxt.inputs) != 3 or nxt.inputs[1] != y or y in (nxt.inputs[0], nxt.inputs[2]) \
                    or not _scalar_const(constants, nxt.inputs[2]):
                continue
            mask, mode, mask_input, fill_const = nxt, MASK_KEEP, 0, nxt.inputs[2]
        if mask is not None:
            y = mask.outputs[0]
            nxt = sole_user(y, "Softmax")
        if nxt is None or nxt.op_type != "Softmax":
            continue
        softmax, y = nxt, nxt.outputs[0]
        out = sole_user(y, "MatMul")
        if out is None or len(out.inputs) != 2 or out.inputs[0] != y or out.inputs[1] == y:
            continue
        chains[id(layer)] = Chain(layer, scale, scale_const, mask, mode, mask_input, fill_const,
                                  softmax, out)
    return chains


class Pending(Allocation):
    """The scores of a deferred attention: no buffer, but Q and K^T (and, once its layer is
    reached, the mask) held until the last view of it is freed."""

    __slots__ = ("chain", "held", "alpha", "fill", "mask")

    def __init__(self, chain: Chain, q: GpuTensor, kt: GpuTensor, alpha: float, fill: float):
        super().__init__(None, 0)
        self.chain, self.alpha, self.fill = chain, alpha, fill
        self.held = [q, kt]
        self.mask: GpuTensor | None = None

    def release(self, ctx) -> None:
        """Drop one reference; the last one frees what it holds."""
        self.refs -= 1
        if self.refs == 0:
            held, self.held = self.held, []
            for handle in held:
                ctx.free(handle)


def _softmax_last(layer: Layer, rank: int) -> bool:
    axis = layer.attr("axis", -1 if layer.opset >= 13 else 1)
    return axis is not None and int(axis) in (-1, rank - 1)


def _concrete(meta: Meta | None) -> bool:
    return meta is not None and all(isinstance(d, int) for d in meta.shape)


def _mask_strides(mask_shape: tuple, scores_shape: tuple) -> tuple[int, int, int, int, int]:
    """(nb1, ms0, ms1, msl, msm) of attention.wgsl for a mask broadcast to the scores (rank
    2 to 4: the batch index is b0 * nb1 + b1)."""
    rank = len(scores_shape)
    full = (1,) * (rank - len(mask_shape)) + tuple(mask_shape)
    strides, step = [0] * rank, 1
    for d in range(rank - 1, -1, -1):
        strides[d] = 0 if full[d] == 1 else step
        step *= full[d]
    strides = [0] * (4 - rank) + strides
    nb1 = scores_shape[-3] if rank >= 3 else 1
    return nb1, strides[0], strides[1], strides[2], strides[3]


class AttentionTable:
    """A backend's attention chains for its model and the layers the run being recorded has
    deferred (``engine.backends.gpu_common.epilogues`` does the same for MatMul epilogues)."""

    def __init__(self):
        self._model = None
        self._chains: dict[int, Chain] = {}
        #: id(middle layer) -> (index of its scores input, index of its mask input or -1)
        self.absorbed: dict[int, tuple[int, int]] = {}
        self.placement: dict | None = None
        self.keep: set[str] = set()
        self.metas: dict[str, Meta] = {}

    def use_model(self, model) -> None:
        if model is not self._model:
            self._model, self._chains = model, find(model)

    def begin_run(self, placement, keep, metas) -> None:
        self.absorbed.clear()
        self.placement, self.keep, self.metas = placement, keep, metas or {}

    def defer(self, ctx, layer: Layer, ins: list, metas: list, scores: Meta) -> GpuTensor | None:
        """At the scores MatMul ``layer``: a pending tensor standing for its product, its
        chain's middle layers marked; None: the MatMul records as usual."""
        chain = self._chains.get(id(layer))
        if chain is None or self.placement is None or ctx.attention_strategy != "fused" \
                or not self._fits(ctx, chain, metas, scores):
            return None
        alpha = 1.0
        if chain.scale is not None:
            c = float(ctx._constants[chain.scale_const].reshape(-1)[0])
            alpha = c if chain.scale.op_type == "Mul" else 1.0 / c
        fill = float(ctx._constants[chain.fill_const].reshape(-1)[0]) if chain.fill_const \
            else 0.0
        pending = Pending(chain, ctx.view(ins[0], ins[0].shape),
                          ctx.view(ins[1], ins[1].shape), alpha, fill)
        y = chain.scores.outputs[0]
        for mid in chain.middle():
            index = mid.inputs.index(y)
            self.absorbed[id(mid)] = (index, chain.mask_input if mid is chain.mask else -1)
            y = mid.outputs[0]
        return GpuTensor(pending, tuple(scores.shape), np.dtype(np.float32))

    def absorb(self, ctx, layer: Layer, inputs: list, out_metas: list[Meta]) -> list | None:
        """A deferred chain's scale, mask or Softmax layer: a view of the pending scores (the
        mask is held for the fused dispatch); None for any other layer."""
        entry = self.absorbed.pop(id(layer), None)
        if entry is None:
            return None
        index, mask_index = entry
        src = inputs[index]
        pending = getattr(src, "alloc", None)
        if not isinstance(pending, Pending):
            raise KernelError(f"layer {layer.name!r}: its attention chain was not deferred")
        if mask_index >= 0:
            mask = inputs[mask_index]
            pending.mask = ctx.view(mask, mask.shape)
            pending.held.append(pending.mask)
        return [ctx.view(src, tuple(out_metas[0].shape))]

    @staticmethod
    def finish(ctx, layer: Layer, ins: list, out_meta: Meta) -> GpuTensor | None:
        """At a MatMul: when its first input is a pending chain's scores, record the fused
        attention and return its output; None otherwise."""
        pending = getattr(ins[0], "alloc", None)
        if not isinstance(pending, Pending):
            return None
        chain = pending.chain
        if layer is not chain.out or (chain.mode != MASK_NONE and pending.mask is None):
            raise KernelError(f"layer {layer.name!r}: reads deferred attention scores it "
                              f"cannot compute")
        q, kt = pending.held[0], pending.held[1]
        v, mask = ins[1], pending.mask
        L, dk, M, dv = q.shape[-2], q.shape[-1], kt.shape[-1], v.shape[-1]
        scores = tuple(q.shape[:-1]) + (M,)
        nb1, ms0, ms1, msl, msm = _mask_strides(mask.shape, scores) if mask is not None \
            else (1, 0, 0, 0, 0)
        y = ctx.tensor(out_meta)
        program = Program.of("attention.wgsl", DK=dk, DV4=dv // 4, MODE=chain.mode,
                             MASK_T="u32" if chain.mode == MASK_KEEP else "f32", WG=WORKGROUP)
        params = pack(L, M, nb1, 0, pending.alpha, pending.fill, 0, 0, ms0, ms1, msl, msm)
        batch = int(np.prod(scores[:-2], dtype=np.int64))
        ctx.dispatch(program, [q, kt, v, q if mask is None else mask, y], params,
                     (-(-L // (4 * WORKGROUP)), batch, 1))
        return y

    def _fits(self, ctx, chain: Chain, metas: list, scores: Meta) -> bool:
        """Whether the whole chain runs fused with these inputs and the plan's shapes."""
        layers = chain.middle() + [chain.out]
        placement = self.placement
        if any(placement.get(x.name) is None or placement[x.name].backend is BackendType.CPU
               for x in layers):
            return False
        if any(x.outputs[0] in self.keep for x in [chain.scores] + chain.middle()):
            return False
        mq, mk = metas[0], metas[1]
        if not (_concrete(mq) and _concrete(mk) and _concrete(scores)):
            return False
        f32 = np.dtype(np.float32)
        rank = len(mq.shape)
        if mq.dtype != f32 or mk.dtype != f32 or rank < 2 or len(mk.shape) != rank:
            return False
        batch, (L, dk), M = tuple(mq.shape[:-2]), mq.shape[-2:], mk.shape[-1]
        if tuple(mk.shape[:-1]) != batch + (dk,) or not (1 <= dk <= MAX_HEAD) or L < 1 \
                or M < 1 or tuple(scores.shape) != batch + (L, M) \
                or int(np.prod(batch, dtype=np.int64)) > 65535:
            return False
        mv = self._meta(ctx, chain.out.inputs[1])
        if not _concrete(mv) or mv.dtype != f32 or len(mv.shape) != rank \
                or tuple(mv.shape[:-1]) != batch + (M,):
            return False
        if not (1 <= mv.shape[-1] <= MAX_HEAD and mv.shape[-1] % 4 == 0):
            return False
        if chain.mask is not None:
            mm = self._meta(ctx, chain.mask.inputs[chain.mask_input])
            want = np.dtype(bool) if chain.mode == MASK_KEEP else f32
            if not _concrete(mm) or mm.dtype != want or rank > 4 \
                    or len(mm.shape) > rank \
                    or tuple(np.broadcast_shapes(tuple(mm.shape), scores.shape)) != scores.shape:
                return False
        if chain.scale is not None and chain.scale.op_type == "Div" and \
                float(ctx._constants[chain.scale_const].reshape(-1)[0]) == 0.0:
            return False  # (x / 0 is inf or NaN; 1 / 0 as a factor is not the same)
        if not _softmax_last(chain.softmax, rank):
            return False
        y = chain.scores.outputs[0]
        for x in layers:  # what the run loop checks before recording each of them
            ins = [scores if n == y else self._meta(ctx, n) for n in x.all_inputs()]
            if any(m is None for m in ins) or ctx.supports(x, ins) is not None:
                return False
            y = x.outputs[0]
        return True

    def _meta(self, ctx, name: str) -> Meta | None:
        meta = self.metas.get(name)
        if meta is None and name in ctx._constants:
            meta = Meta.of(ctx._constants[name])
        return meta

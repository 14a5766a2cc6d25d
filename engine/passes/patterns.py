"""Import-time recognition of LayerNorm and GELU as exporters write them out, op by op.

* LayerNorm over the last axis: ReduceMean -> Sub -> Pow 2 (or Mul by itself) ->
  ReduceMean -> Add eps -> Sqrt -> Div -> Mul gamma [-> Add beta] becomes one
  ``LayerNormalization`` (opset 17);
* GELU with Erf: Div(x, sqrt 2) or Mul(x, 1/sqrt 2) -> Erf -> Add 1 -> Mul by x -> Mul 0.5
  (or the Mul by x/2 that torch writes) becomes ``Gelu`` (opset 20);
* GELU's tanh form (GPT-2): Pow(x, 3) -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh ->
  Add 1 -> Mul by x -> Mul 0.5 (or by x/2) becomes ``Gelu(approximate="tanh")``.

Every backend then runs one layer (one kernel, one dispatch, one render pass) where the
exported graph had 5 to 9. The results differ by float rounding only. A chain is rewritten
only when none of its intermediates is a graph output or read outside the chain.
"""

from __future__ import annotations

import math

import numpy as np

from engine.model import Layer, Model

SQRT2 = math.sqrt(2.0)


def _near(value: float | None, target: float, rel: float = 1e-4) -> bool:
    return value is not None and abs(value - target) <= rel * abs(target)


class _Graph:
    def __init__(self, model: Model):
        self.m = model
        self.outputs = {o.name for o in model.outputs}
        self.producer: dict[str, Layer] = {}
        self.users: dict[str, list[Layer]] = {}
        for layer in model.layers:
            for o in layer.outputs:
                if o:
                    self.producer[o] = layer
            for i in dict.fromkeys(layer.all_inputs()):  # (a layer reading x twice: once)
                if i:
                    self.users.setdefault(i, []).append(layer)
        self.removed: set[int] = set()

    def scalar(self, name: str) -> float | None:
        value = self.m.constants.get(name)
        if value is None or np.asarray(value).size != 1 or np.asarray(value).dtype.kind != "f":
            return None
        return float(np.asarray(value).reshape(-1)[0])

    def only_users(self, name: str, count: int = 1) -> list[Layer] | None:
        """The ``count`` readers of ``name`` when it has exactly those and is no graph
        output, else None."""
        users = self.users.get(name, [])
        if name in self.outputs or len(users) != count or \
                any(id(u) in self.removed for u in users):
            return None
        return users

    def next(self, name: str, op_type: str) -> Layer | None:
        users = self.only_users(name)
        if users is None or users[0].op_type != op_type or users[0].domain not in ("", "ai.onnx"):
            return None
        return users[0]

    def made_by(self, name: str, op_type: str) -> Layer | None:
        layer = self.producer.get(name)
        return layer if layer is not None and layer.op_type == op_type and \
            id(layer) not in self.removed else None

    @staticmethod
    def other(layer: Layer, name: str) -> str | None:
        """The other input of a two-input layer that reads ``name``."""
        if len(layer.inputs) != 2 or name not in layer.inputs:
            return None
        return layer.inputs[1] if layer.inputs[0] == name else layer.inputs[0]

    def times_scalar(self, name: str, op_type: str, value: float) -> Layer | None:
        """The sole reader of ``name`` when it is ``op_type`` by a constant near ``value``."""
        layer = self.next(name, op_type)
        if layer is None or not _near(self.scalar(self.other(layer, name) or ""), value):
            return None
        return layer

    def replace(self, chain: list[Layer], new: Layer) -> None:
        """Put ``new`` where the last layer of ``chain`` was and drop the chain."""
        ids = {id(layer) for layer in chain}
        last = max(k for k, layer in enumerate(self.m.layers) if id(layer) in ids)
        self.m.layers.insert(last + 1, new)
        self.removed.update(ids)


def _gelu_tail(g: _Graph, x: str, inner: str, chain: list[Layer]) -> str | None:
    """Add 1 -> Mul by x -> Mul 0.5, or Add 1 -> Mul by (x * 0.5), after ``inner`` (the Erf
    or Tanh output): the GELU's output name, with the layers appended to ``chain``."""
    one = g.times_scalar(inner, "Add", 1.0)
    if one is None:
        return None
    mul = g.next(one.outputs[0], "Mul")
    if mul is None:
        return None
    other = g.other(mul, one.outputs[0])
    if other == x:
        half = g.times_scalar(mul.outputs[0], "Mul", 0.5)
        if half is None:
            return None
        chain += [one, mul, half]
        return half.outputs[0]
    half = g.made_by(other or "", "Mul")
    if half is None or g.other(half, x) is None or not _near(g.scalar(g.other(half, x)), 0.5) \
            or g.only_users(half.outputs[0]) is None:
        return None
    chain += [one, mul, half]
    return mul.outputs[0]


def _gelu_erf(g: _Graph, erf: Layer) -> tuple[list[Layer], str, str] | None:
    scaled = erf.inputs[0]
    pre = g.producer.get(scaled)
    if pre is None or g.only_users(scaled) is None or len(pre.inputs) != 2:
        return None
    if pre.op_type == "Div" and _near(g.scalar(pre.inputs[1]), SQRT2):
        x = pre.inputs[0]
    elif pre.op_type == "Mul" and _near(g.scalar(pre.inputs[1]), 1 / SQRT2):
        x = pre.inputs[0]
    elif pre.op_type == "Mul" and _near(g.scalar(pre.inputs[0]), 1 / SQRT2):
        x = pre.inputs[1]
    else:
        return None
    chain = [pre, erf]
    out = _gelu_tail(g, x, erf.outputs[0], chain)
    return None if out is None else (chain, x, out)


def _gelu_tanh(g: _Graph, tanh: Layer) -> tuple[list[Layer], str, str] | None:
    scale = g.made_by(tanh.inputs[0], "Mul")
    if scale is None or len(scale.inputs) != 2 or g.only_users(tanh.inputs[0]) is None:
        return None
    k = next((i for i in scale.inputs if _near(g.scalar(i), math.sqrt(2 / math.pi))), "")
    inner = g.other(scale, k)
    add = g.made_by(inner or "", "Add")
    if add is None or len(add.inputs) != 2 or g.only_users(inner) is None:
        return None
    for x, cubic in (add.inputs, add.inputs[::-1]):
        coeff = g.made_by(cubic, "Mul")
        if coeff is None or g.only_users(cubic) is None:
            continue
        c = next((i for i in coeff.inputs if _near(g.scalar(i), 0.044715)), "")
        cube_name = g.other(coeff, c)
        cube = g.made_by(cube_name or "", "Pow")
        if cube is None or cube.inputs[0] != x or not _near(g.scalar(cube.inputs[1]), 3.0) \
                or g.only_users(cube_name) is None:
            continue
        chain = [cube, coeff, add, scale, tanh]
        out = _gelu_tail(g, x, tanh.outputs[0], chain)
        return None if out is None else (chain, x, out)
    return None


def _last_axis_mean(g: _Graph, layer: Layer) -> bool:
    if layer.op_type != "ReduceMean" or not layer.attr("keepdims", 1):
        return False
    axes = layer.attr("axes")
    if axes is None and len(layer.inputs) > 1 and layer.inputs[1]:
        axes = g.m.constants.get(layer.inputs[1])
    return axes is not None and [int(a) for a in np.asarray(axes).reshape(-1)] == [-1]


def _vector(g: _Graph, name: str) -> np.ndarray | None:
    """A constant that is a vector along the last axis (leading dims of size 1)."""
    value = g.m.constants.get(name)
    if value is None or np.asarray(value).dtype.kind != "f":
        return None
    value = np.asarray(value)
    return value.reshape(-1) if value.ndim >= 1 and value.size == value.shape[-1] else None


def _layer_norm(g: _Graph, mean: Layer) -> tuple[list[Layer], list[str], float, str] | None:
    if not _last_axis_mean(g, mean):
        return None
    x = mean.inputs[0]
    sub = g.next(mean.outputs[0], "Sub")
    if sub is None or sub.inputs != [x, mean.outputs[0]]:
        return None
    diff = sub.outputs[0]
    readers = g.only_users(diff, 2)
    if readers is None:
        return None
    square = next((r for r in readers if r.op_type in ("Pow", "Mul")), None)
    if square is None or not (square.op_type == "Pow" and square.inputs[0] == diff and
                              _near(g.scalar(square.inputs[1]), 2.0)
                              or square.op_type == "Mul" and square.inputs == [diff, diff]):
        return None
    var = g.next(square.outputs[0], "ReduceMean")
    if var is None or not _last_axis_mean(g, var):
        return None
    add = g.next(var.outputs[0], "Add")
    eps = g.scalar(g.other(add, var.outputs[0]) or "") if add is not None else None
    sqrt = g.next(add.outputs[0], "Sqrt") if eps is not None else None
    div = g.next(sqrt.outputs[0], "Div") if sqrt is not None else None
    if div is None or div.inputs != [diff, sqrt.outputs[0]] or div not in readers:
        return None
    scale = g.next(div.outputs[0], "Mul")
    gamma = g.other(scale, div.outputs[0]) if scale is not None else None
    if gamma is None or _vector(g, gamma) is None:
        return None
    chain, out, inputs = [mean, sub, square, var, add, sqrt, div, scale], scale.outputs[0], \
        [x, gamma]
    shift = g.next(out, "Add")
    beta = g.other(shift, out) if shift is not None else None
    if beta is not None and _vector(g, beta) is not None:
        chain.append(shift)
        out = shift.outputs[0]
        inputs.append(beta)
    return chain, inputs, eps, out


def _vector_input(g: _Graph, name: str) -> str:
    """``name``, or a new 1-D constant holding its values when it has leading 1-dims."""
    value = np.asarray(g.m.constants[name])
    if value.ndim == 1:
        return name
    new = f"{name}_vector"
    while new in g.m.constants or new in g.producer:
        new += "_"
    g.m.constants[new] = value.reshape(-1)
    return new


def fuse_patterns(model: Model) -> dict[str, int]:
    """Rewrite the chains in place; returns how many of each were found."""
    g = _Graph(model)
    counts = {"layer_norm": 0, "gelu": 0}
    for layer in list(model.layers):
        if id(layer) in g.removed or layer.domain not in ("", "ai.onnx"):
            continue
        if layer.op_type in ("Erf", "Tanh"):
            found = (_gelu_erf if layer.op_type == "Erf" else _gelu_tanh)(g, layer)
            if found is not None:
                chain, x, out = found
                approximate = "none" if layer.op_type == "Erf" else "tanh"
                g.replace(chain, Layer(f"{chain[-1].name}_gelu", "Gelu", [x], [out],
                                       {"approximate": approximate}, opset=max(20, layer.opset)))
                counts["gelu"] += 1
        elif layer.op_type == "ReduceMean":
            found = _layer_norm(g, layer)
            if found is not None:
                chain, inputs, eps, out = found
                inputs = [inputs[0]] + [_vector_input(g, n) for n in inputs[1:]]
                g.replace(chain, Layer(f"{chain[-1].name}_layernorm", "LayerNormalization",
                                       inputs, [out], {"axis": -1, "epsilon": eps},
                                       opset=max(17, layer.opset)))
                counts["layer_norm"] += 1
    model.layers[:] = [x for x in model.layers if id(x) not in g.removed]
    return counts

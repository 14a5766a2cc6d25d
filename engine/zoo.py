"""The classic CNN zoo shipped (weights stripped) in ``onnx/backend/test/data/light``.

Each stripped weight is a ``ConstantOfShape`` node; ``build`` turns every such node
into a seeded random initializer scaled for its role (He-scaled conv/gemm weights,
BatchNorm statistics near identity), so activations stay in a sane range through
deep networks. Built files are cached.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import numpy_helper

from engine.inputs import random_feeds

ZOO = ["squeezenet", "shufflenet", "inception_v2", "bvlc_alexnet", "inception_v1", "resnet50",
       "densenet121", "zfnet512", "vgg19"]


def light_dir() -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def cache_dir() -> str:
    base = os.environ.get("ENGINE_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "inference-workbench")
    path = os.path.join(base, "zoo")
    os.makedirs(path, exist_ok=True)
    return path


def _consumer_role(graph: onnx.GraphProto, name: str) -> tuple[str, int, onnx.NodeProto | None]:
    for node in graph.node:
        for i, inp in enumerate(node.input):
            if inp == name:
                if node.op_type == "Unsqueeze" and node.output:
                    return _consumer_role(graph, node.output[0])
                return node.op_type, i, node
    return "", -1, None


def _random_weight(rng, shape, role: tuple[str, int, onnx.NodeProto | None]) -> np.ndarray:
    op, index, node = role
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape))
    if op in ("Conv", "ConvTranspose") and index == 1:
        fan_in = int(np.prod(shape[1:])) or 1
        return rng.normal(0, np.sqrt(2.0 / fan_in), shape)
    if op == "Gemm" and index == 1:
        trans_b = any(a.name == "transB" and a.i for a in node.attribute) if node else False
        fan_in = shape[1] if trans_b and len(shape) > 1 else shape[0]
        return rng.normal(0, np.sqrt(1.0 / max(fan_in, 1)), shape)
    if op == "BatchNormalization":
        if index == 1:
            return rng.uniform(0.8, 1.2, shape)
        if index == 4:
            return rng.uniform(0.5, 1.5, shape)
        return rng.normal(0, 0.1, shape)
    if op == "Mul":
        return rng.uniform(0.8, 1.2, shape)
    return rng.normal(0, 0.05, shape) if n else np.zeros(shape)


#: bump when the weights a build produces change, so cached files are rebuilt
FORMAT = 3  # 3: calibrated on engine.inputs.random_feeds
#: standard deviation the classifier's logits are scaled to (a softmax of such logits is
#: neither saturated at 0/1 nor flat, so comparing it says something)
LOGIT_STD = 2.0
_PASS_THROUGH = ("Reshape", "Flatten", "GlobalAveragePool", "AveragePool", "Relu", "Dropout")


def logits_name(model: onnx.ModelProto) -> str | None:
    """Name of the tensor a zoo model's final Softmax normalises (None without a Softmax)."""
    soft = [n for n in model.graph.node if n.op_type == "Softmax"]
    return soft[-1].input[0] if soft else None


def logits_info(model: onnx.ModelProto) -> onnx.ValueInfoProto:
    """A value info (with its inferred shape) for the logits, to add them as a graph output."""
    name = logits_name(model)
    inferred = onnx.shape_inference.infer_shapes(model)
    for vi in inferred.graph.value_info:
        if vi.name == name:
            return vi
    raise ValueError(f"no shape inferred for {name!r}")


def _calibrate_logits(model: onnx.ModelProto, seed: int) -> None:
    """Scale the classifier (the Gemm/Conv that feeds the Softmax through pooling/reshape/Relu,
    all positively homogeneous) so the logits have std ``LOGIT_STD`` on the sample input.

    Random weights make residual networks' features grow with depth; unscaled, resnet50 and
    shufflenet give an exactly one-hot softmax that hides any error. The scale is measured
    with the engine's own CPU backend once, when the model is built.
    """
    name = logits_name(model)
    if name is None:
        return
    producers = {o: n for n in model.graph.node for o in n.output}
    node = producers.get(name)
    while node is not None and node.op_type in _PASS_THROUGH:
        node = producers.get(node.input[0])
    if node is None or node.op_type not in ("Gemm", "Conv"):
        return
    inits = {i.name: i for i in model.graph.initializer}
    params = []
    for n in node.input[1:3]:
        src = producers.get(n)
        while n not in inits and src is not None and src.op_type in ("Reshape", "Unsqueeze"):
            n, src = src.input[0], producers.get(src.input[0])  # weights reshaped in-graph
        if n in inits:
            params.append(inits[n])
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend([logits_info(model)])
    from engine import ModelLoader, Worker

    loaded = ModelLoader.from_proto(probe)
    with Worker(loaded, "cpu") as worker:
        worker.schedule(sample_input(loaded, seed))
        logits = worker.peek_output().download_to_array()
    std = float(np.std(logits))
    if not np.isfinite(std) or std == 0:
        return
    for p in params:
        scaled = numpy_helper.to_array(p) * np.float32(LOGIT_STD / std)
        p.CopyFrom(numpy_helper.from_array(scaled.astype(np.float32), p.name))


def build(name: str, seed: int = 0, force: bool = False) -> str:
    """Path of the real-weight version of zoo model ``name`` (built on first use)."""
    if name not in ZOO:
        raise ValueError(f"unknown zoo model {name!r}; choose one of {', '.join(ZOO)}")
    out = os.path.join(cache_dir(), f"{name}_seed{seed}_v{FORMAT}.onnx")
    if os.path.exists(out) and not force:
        return out
    model = onnx.load(os.path.join(light_dir(), f"light_{name}.onnx"))
    graph = model.graph
    rng = np.random.default_rng(seed)
    inits = {i.name: i for i in graph.initializer}
    keep_nodes, new_inits, used_shape_inputs = [], [], set()
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = numpy_helper.to_array(inits[node.input[0]])
            value = next((numpy_helper.to_array(a.t) for a in node.attribute
                          if a.name == "value"), np.zeros(1, np.float32))
            if value.dtype.kind == "f":
                data = _random_weight(rng, shape, _consumer_role(graph, node.output[0]))
            else:
                data = np.full(tuple(shape), value.reshape(-1)[0])
            new_inits.append(numpy_helper.from_array(data.astype(value.dtype), node.output[0]))
            used_shape_inputs.add(node.input[0])
        else:
            keep_nodes.append(node)
    del graph.node[:]
    graph.node.extend(keep_nodes)
    remaining = [i for i in graph.initializer if i.name not in used_shape_inputs]
    del graph.initializer[:]
    graph.initializer.extend(remaining + new_inits)
    init_names = {i.name for i in graph.initializer}
    data_inputs = [i for i in graph.input
                   if i.name not in init_names and i.name not in used_shape_inputs]
    del graph.input[:]
    graph.input.extend(data_inputs)
    if model.ir_version < 4:
        model.ir_version = 4
    _calibrate_logits(model, seed)
    onnx.checker.check_model(model)
    tmp = out + f".tmp{os.getpid()}"
    onnx.save(model, tmp)
    os.replace(tmp, out)
    return out


def sample_input(model, seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded random image batch for a zoo model's single input."""
    return random_feeds(model.inputs[:1], seed=seed + 1000)

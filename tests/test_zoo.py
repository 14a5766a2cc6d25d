"""The nine zoo CNNs (seeded random weights) on the CPU backend against onnxruntime.

Both the model output and the logits before the final Softmax are compared (relative L2
error <= 1e-3): the zoo build scales the classifier so the softmax is not saturated, and the
logits would show an error a softmax could still hide.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from engine import ModelLoader, Worker, zoo

ort = pytest.importorskip("onnxruntime")

BIG = {"vgg19", "densenet121", "inception_v2", "resnet50", "zfnet512"}
TOL = 1e-3


def _with_logits(path: str) -> onnx.ModelProto:
    proto = onnx.load(path)
    if zoo.logits_name(proto):
        proto.graph.output.extend([zoo.logits_info(proto)])
    return proto


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in BIG else n
                                  for n in zoo.ZOO])
def test_zoo_matches_onnxruntime(name):
    proto = _with_logits(zoo.build(name))
    model = ModelLoader.from_proto(proto)
    feeds = zoo.sample_input(model)
    with Worker(model, "cpu") as worker:
        worker.schedule(feeds)
        ours = [worker.peek_output(o.name).download_to_array() for o in model.outputs]
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)
    for spec, got, want in zip(model.outputs, ours, expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        err = np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want)
        assert err <= TOL, f"{name} output {spec.name!r}: relative L2 error {err:.2e}"
    if zoo.logits_name(proto):
        probs = expected[0]
        assert 0.01 < probs.max() < 0.9, "the zoo softmax should be neither flat nor saturated"


def test_zoo_fusion_happens():
    model = ModelLoader.load(zoo.build("resnet50"))
    convs = [layer for layer in model.layers if layer.op_type == "Conv"]
    assert not any(layer.op_type == "BatchNormalization" for layer in model.layers)
    assert sum(1 for c in convs if c.attr("activation") == "Relu") >= 30

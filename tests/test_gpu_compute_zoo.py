"""The nine zoo CNNs on GPU_COMPUTE against onnxruntime (relative L2 <= 1e-3).

The zoo's random weights saturate the final Softmax (outputs are nearly one-hot), which would
hide errors, so the logits feeding it are compared too: the test adds them as a model output.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.zoo import ZOO, build, sample_input

pytestmark = pytest.mark.usefixtures("require_gpu")


def _with_logits(path: str) -> onnx.ModelProto:
    proto = onnx.shape_inference.infer_shapes(onnx.load(path))
    last = proto.graph.node[-1]
    if last.op_type == "Softmax":
        info = {v.name: v for v in proto.graph.value_info}
        logits = info.get(last.input[0]) or onnx.helper.make_tensor_value_info(
            last.input[0], onnx.TensorProto.FLOAT, None)
        proto.graph.output.append(logits)
    return proto


def _rel_l2(got, want) -> float:
    want = want.astype(np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


@pytest.mark.parametrize("name", ZOO)
def test_zoo_matches_onnxruntime(name):
    import onnxruntime as ort  # test oracle only

    proto = _with_logits(build(name))
    model = ModelLoader.from_proto(proto)
    feeds = sample_input(model)
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    with Worker(model, BackendType.GPU_COMPUTE) as worker:
        on_gpu = sum(p.backend is BackendType.GPU_COMPUTE for p in worker.placement.values())
        assert on_gpu >= 0.9 * len(model.layers), worker.placement
        worker.schedule(feeds)
        for spec in model.outputs:
            got = worker.peek_output(spec.name).download_to_array()
            err = _rel_l2(got, expected[spec.name])
            assert err <= 1e-3, f"{name} output {spec.name}: relative L2 {err:.2e}"

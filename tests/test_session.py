"""The workbench's session state is plain Python: no Qt, observable, persistable."""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys

from engine import BackendType
from workbench.session import BatchRow, CompareResult, Session


def test_session_imports_no_qt():
    code = "import sys, workbench.session; print('PySide6' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_overrides_shapes_compare_batch():
    s = Session()
    topics = []
    s.subscribe(topics.append)
    s.set_model("/m.onnx", {"a": BackendType.CPU})
    s.set_overrides(s.with_override(["b", "c"], BackendType.GPU_COMPUTE))
    assert s.overrides_for(BackendType.GPU_COMPUTE) == s.overrides
    assert s.overrides_for(BackendType.GPU_PIXEL) == {"a": BackendType.CPU}
    text = Session.overrides_to_json(s.overrides)
    assert Session.overrides_from_json(text) == s.overrides
    assert Session.overrides_from_json("not json") == {}
    s.set_overrides(s.with_override(["b"], None))
    assert set(s.overrides) == {"a", "c"}
    s.set_input_shape("x", (2, 3))
    assert s.input_shapes == {"x": (2, 3)}
    rows = [{"name": n, "op_type": "Relu", "rel_l2": r, "max_abs": r}
            for n, r in (("l0", 0.0), ("l1", 1e-5), ("l2", math.nan), ("l3", 1.0))]
    s.set_compare(CompareResult(BackendType.GPU_COMPUTE, BackendType.CPU, rows))
    assert s.first_divergent() == "l2"  # NaN counts as divergent
    s.set_threshold(1e-6)
    assert s.first_divergent() == "l1"
    s.start_batch(2)
    s.add_batch_row(BatchRow("a.png", [(3, 0.9), (1, 0.05)], ["three", "one"], 1.5))
    s.add_batch_row(BatchRow("b.npy", error="bad shape"))
    table = list(csv.reader(io.StringIO(s.batch_csv())))
    assert table[0] == ["source", "ms", "error", "top1_class", "top1_label", "top1_score",
                        "top2_class", "top2_label", "top2_score"]
    assert table[1][:4] == ["a.png", "1.500", "", "3"] and table[2][2] == "bad shape"
    assert topics == ["model", "overrides", "overrides", "shapes", "compare", "compare",
                      "batch", "batch", "batch"]
    s.set_model("/other.onnx")
    assert s.compare is None and s.batch == [] and s.overrides == {}

"""The unary-op records (engine/ops/activations.py) and the shader sources agree, and the
one WGSL loader expands includes once and templates strictly."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from engine.backends.gpu_common.shaders import expanded, load_shader
from engine.ops.activations import ACTIVATIONS, SELU_ALPHA, SELU_GAMMA, UNARY_OPS, shader_ops
from engine.passes.fusion import apply_activation

ROOT = Path(__file__).resolve().parents[1]
WGSL = (ROOT / "shaders" / "common" / "activations.wgsl").read_text()


def test_every_shader_record_has_its_function():
    defined = set(re.findall(r"^fn (op_\w+)\(", WGSL, re.M))
    for rec in shader_ops():
        assert f"op_{rec.name}" in defined, rec.name
        if rec.ints:
            assert f"op_{rec.name}_i32" in defined, rec.name
    # and no function without a record (Identity is the no-op activation)
    names = {f[3:].split("_")[0] for f in defined} - {"Identity"}
    assert names <= set(UNARY_OPS), names - set(UNARY_OPS)


def test_fusable_activations_have_reference_semantics_and_cpu_codes():
    from engine.backends.cpu.activation import _CODES

    assert set(_CODES) == set(ACTIVATIONS)
    y = np.linspace(-3, 3, 13, dtype=np.float32)
    for name, rec in ACTIVATIONS.items():
        apply_activation(y, name, rec.defaults())


def test_selu_constants_are_float32_exact_and_written_once():
    assert float(np.float32(SELU_ALPHA)) == SELU_ALPHA
    assert float(np.float32(SELU_GAMMA)) == SELU_GAMMA
    hits = [p for p in (ROOT / "engine").rglob("*.py") if "1.6732" in p.read_text()]
    assert hits == [ROOT / "engine" / "ops" / "activations.py"]


def test_loader_includes_each_file_once():
    text = expanded("compute/conv2d.wgsl")  # includes activations.wgsl, which includes math
    assert "//!include" not in text
    assert text.count("fn relu_f(") == 1
    assert text.count("fn op_Relu(") == 1
    pixel = expanded("pixel/elementwise.wgsl", "pixel/common.wgsl")
    assert pixel.count("fn vs_main(") == 1 and pixel.count("fn b_Add(") == 1


def test_loader_templates_strictly():
    with pytest.raises(ValueError, match="'OP'"):
        load_shader("compute/unary.wgsl", T="f32", U="f32")
    src = load_shader("compute/unary.wgsl", T="f32", U="f32", OP="Swish")
    assert "op_Swish(x[i]" in src and "${" not in src

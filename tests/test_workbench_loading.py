"""Models load in a helper process (the UI's interpreter lock stays free), with a fallback."""

from __future__ import annotations

import os

import pytest
from test_workbench_helpers import block_model, unknown_op_model

from engine import ModelLoader, ModelLoadError
from workbench.model_process import ModelProcess


@pytest.fixture
def loader():
    proc = ModelProcess()
    proc.start()
    yield proc
    proc.close()


def test_helper_process_loads_the_same_model(loader, tmp_path):
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 3)
    model = loader.load(path)
    local = ModelLoader.load(path)
    assert loader._proc is not None and loader._proc.pid != os.getpid()
    assert [la.name for la in model.layers] == [la.name for la in local.layers]
    assert model.inputs[0].shape == local.inputs[0].shape
    assert model.constants.keys() == local.constants.keys()
    assert not loader.in_process


def test_helper_reports_bad_models_like_the_loader(loader, tmp_path):
    bad = str(tmp_path / "unknown.onnx")
    unknown_op_model(bad)
    with pytest.raises(ModelLoadError) as helper:
        loader.load(bad)
    with pytest.raises(ModelLoadError) as local:
        ModelLoader.load(bad)
    assert str(helper.value) == str(local.value)
    assert "FrobnicateTensor" in str(helper.value)
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 2)
    assert len(loader.load(path).layers) == 11  # the helper keeps serving


def test_a_dead_helper_falls_back_to_loading_here(loader, tmp_path):
    path = str(tmp_path / "blocks.onnx")
    block_model(path, 2)
    loader.load(path)
    loader._proc.kill()
    loader._proc.wait()
    assert len(loader.load(path).layers) == 11
    assert loader.in_process


def test_external_weights_stay_mapped(loader, tmp_path):
    import onnx

    from workbench.model_process import _mapped

    path = str(tmp_path / "blocks.onnx")
    block_model(path, 2, shape=(1, 64, 8, 8))
    proto = onnx.load(path)
    ext = str(tmp_path / "external.onnx")
    onnx.save_model(proto, ext, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    model = loader.load(ext)
    # the helper does not copy mapped weights through the pipe: they are mapped here
    assert any(_mapped(v) for v in model.constants.values())
    assert not loader.in_process and loader._proc.poll() is None

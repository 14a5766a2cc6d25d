"""Session logic moved off the main window: backends, the run state machine and results.

No window: the first tests use the Session alone (no Qt); the last drives the UI-engine
bridge (``EngineController``, a QObject but no widget) through the Session and checks the
outputs against an engine ``Worker`` run directly on the same fresh random inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import BackendType, ModelLoader, Worker
from engine.inputs import random_feeds
from workbench.paths import DEMO_MODEL
from workbench.session import PENDING, LoadedModel, RunResult, Session


@pytest.fixture(scope="module")
def model():
    return ModelLoader.load(DEMO_MODEL)


def fresh_feeds(model) -> dict[str, np.ndarray]:
    seed = int(np.random.SeedSequence().entropy % 2**31)
    return random_feeds(model, seed=seed)


def direct_run(model, feeds, kind=BackendType.CPU):
    """Outputs, profile and placement of one run on an engine worker of its own."""
    with Worker(model, kind) as worker:
        worker.schedule(feeds)
        outputs = {o.name: worker.peek_output(o.name).download_to_array() for o in model.outputs}
        return outputs, worker.last_profile, dict(worker.placement)


def loaded(model, generation=1) -> LoadedModel:
    return LoadedModel(DEMO_MODEL, model, layout=None, load_ms=5.0, layout_ms=1.0,
                       generation=generation)


def test_backend_choice_and_worker_failures(model):
    s = Session()
    topics = []
    s.subscribe(topics.append)
    assert s.backend is BackendType.CPU and s.is_backend_available(BackendType.CPU)
    assert s.unavailable_reason(BackendType.GPU_COMPUTE) is None  # still being checked
    assert s.backend_status[BackendType.GPU_COMPUTE] == PENDING
    assert not s.choose_backend(BackendType.CPU)  # no model: no worker to build
    s.set_loaded(loaded(model))
    assert s.model is model and s.prepared_for is None and s.load_timings["load_ms"] == 5.0
    assert s.choose_backend(BackendType.CPU) and s.prepared_for is BackendType.CPU
    assert not s.choose_backend(BackendType.CPU)  # already prepared
    assert s.choose_backend(BackendType.GPU_PIXEL) and s.placement == {}
    # the GPU backend turns out unavailable while its worker is built: back to the CPU
    assert s.worker_failed(BackendType.GPU_PIXEL, "no adapter", unavailable=True)
    assert s.unavailable_reason(BackendType.GPU_PIXEL) == "no adapter"
    assert s.prepared_for is None
    assert not s.worker_failed(BackendType.CPU, "bad model", unavailable=False)
    # a worker of a backend no longer selected does not change the placement shown
    _, _, placement = direct_run(model, fresh_feeds(model))
    assert not s.set_placement(BackendType.GPU_COMPUTE, placement) and s.placement == {}
    s.choose_backend(BackendType.CPU)
    assert s.set_placement(BackendType.CPU, placement) and s.placement == placement
    # a new model: an unavailable backend is not kept, results are forgotten
    s.choose_backend(BackendType.GPU_PIXEL)
    s.set_loaded(loaded(model, generation=2))
    assert s.backend is BackendType.CPU and s.placement == {} and s.prepared_for is None
    assert "backends" in topics and "placement" in topics and topics[-1] == "model"


def test_run_state_machine_and_results_match_a_direct_run(model):
    s = Session()
    assert s.run_blocker().startswith("Open a model first")
    s.set_loaded(loaded(model, generation=3))
    assert s.run_blocker() == f"No value for input(s) {model.inputs[0].name}"
    feeds = fresh_feeds(model)
    s.set_feeds(feeds)
    assert s.run_blocker() is None and s.missing_inputs() == []

    outputs, profile, placement = direct_run(model, feeds)
    result = RunResult(3, 1, BackendType.CPU, profile, outputs, placement, token=7)
    assert not s.accepts(result, 3)  # no run of the session yet
    s.begin_run(7)
    assert s.running and s.token == 7
    assert not s.accepts(result, 4)  # another model is loading
    assert not s.accepts(RunResult(3, 1, BackendType.CPU, profile, outputs, token=6), 3)
    assert s.accepts(result, 3)
    s.record_result(result)
    assert s.last_profile is profile and s.runs_shown == 1
    assert s.times == {t.name: t.ms for t in profile.layers}
    assert set(s.times) == {layer.name for layer in model.layers}
    for name, want in outputs.items():
        np.testing.assert_array_equal(s.last_outputs[name], want)

    assert not s.run_finished(6) and s.running  # another run's end is not ours
    assert s.run_finished(7) and not s.running
    s.begin_run(8)
    assert not s.run_failed(7) and s.running
    assert s.run_failed(-1) and not s.running and s.token is None  # a job's internal error
    s.begin_run(9)
    assert s.end_run() and not s.end_run()
    assert not s.accepts(RunResult(3, 2, BackendType.CPU, profile, outputs, token=9), 3)

    s.set_loaded(loaded(model, generation=4))
    assert s.last_profile is None and s.last_outputs == {} and s.runs_shown == 0
    assert s.feeds == {} and s.times == {}


def test_run_through_the_bridge_matches_a_direct_worker(qtbot, model):
    from workbench.controller import EngineController

    controller = EngineController()
    s = Session()
    try:
        with qtbot.waitSignal(controller.model_ready, timeout=120_000) as sig:
            controller.load(DEMO_MODEL)
        s.set_loaded(sig.args[0])
        assert s.choose_backend(BackendType.CPU)
        with qtbot.waitSignal(controller.worker_ready, timeout=120_000) as sig:
            controller.prepare(s.backend, s.overrides_for(s.backend))
        assert s.set_placement(*sig.args)

        feeds = fresh_feeds(s.model)
        s.set_feeds(feeds)
        assert s.run_blocker() is None
        with qtbot.waitSignal(controller.result_ready, timeout=120_000):
            s.begin_run(controller.run(s.feeds, continuous=False))
        result = controller.take_result()
        assert s.accepts(result, controller.generation)
        s.record_result(result)
        assert s.run_finished(result.token) and not s.running

        want, profile, placement = direct_run(model, feeds)
        assert set(s.last_outputs) == set(want)
        for name, expected in want.items():
            np.testing.assert_allclose(s.last_outputs[name], expected, rtol=1e-5, atol=1e-6)
        assert [t.name for t in s.last_profile.layers] == [t.name for t in profile.layers]
        assert {n: p.backend for n, p in s.placement.items()} == \
            {n: p.backend for n, p in placement.items()}

        # a result of a run the session stopped is not shown
        with qtbot.waitSignal(controller.result_ready, timeout=120_000):
            s.begin_run(controller.run(s.feeds, continuous=True))
        s.end_run()
        controller.stop()
        assert not s.accepts(controller.take_result(), controller.generation)
        assert s.runs_shown == 1
    finally:
        controller.shutdown(timeout=30)


def test_refused_move_restores_overrides_and_compare_flags():
    s = Session()
    s.set_model("/m.onnx", {"a": BackendType.CPU})
    s.move_layers(["b"], BackendType.GPU_COMPUTE)
    assert s.overrides == {"a": BackendType.CPU, "b": BackendType.GPU_COMPUTE}
    assert s.fallback_overrides(BackendType.GPU_COMPUTE) == {"a": BackendType.CPU}
    s.move_refused()
    assert s.overrides == {"a": BackendType.CPU}
    s.move_layers(["a"], None)
    assert s.overrides == {} and s.previous_overrides == {"a": BackendType.CPU}
    assert not s.drop_compare()
    s.start_compare()
    assert s.comparing and s.drop_compare() and not s.comparing
    s.start_compare()
    s.set_compare(None)
    assert not s.comparing

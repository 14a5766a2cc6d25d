"""Replays (both GPU backends) copy the outputs that the previous run's reader read into
staging buffers inside the run's own command encoder, so reading them back maps without a
submit of its own. Values must be those of their own run, whatever the order of runs and
reads, for float, bool and int64 outputs; outputs no longer read stop being copied."""

from __future__ import annotations

import numpy as np
import pytest
from modelgen import F, model
from onnx import TensorProto, helper

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.backends.gpu_common.device import GpuDevice
from engine.backends.gpu_compute import replay_submit
from engine.backends.gpu_pixel import replay_submit as pixel_submit
from engine.backends.gpu_pixel.renderer import Renderer

pytestmark = pytest.mark.usefixtures("require_gpu")
SHAPE = (3, 37)


@pytest.fixture(params=[BackendType.GPU_COMPUTE, BackendType.GPU_PIXEL],
                ids=["compute", "pixel"])
def GPU(request):
    return request.param


def _three_outputs(backend: BackendType):
    """x -> sq (float), pos, big: bool and int64 on GPU_COMPUTE; on GPU_PIXEL, whose
    textures hold floats only (and which computes comparisons and integer casts on the CPU,
    so that the plan would not replay), float too."""
    floats = backend is BackendType.GPU_PIXEL
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("Relu" if floats else "Greater",
                              ["x"] if floats else ["x", "zero"], ["pos"]),
             helper.make_node("Mul", ["x", "ten"], ["x10"]),
             helper.make_node("Floor" if floats else "Cast", ["x10"], ["big"],
                              **({} if floats else {"to": TensorProto.INT64}))]
    inits = [helper.make_tensor("zero", F, [], [0.0]), helper.make_tensor("ten", F, [], [10.0])]
    outs = [("sq", F, list(SHAPE)), ("pos", F if floats else TensorProto.BOOL, list(SHAPE)),
            ("big", F if floats else TensorProto.INT64, list(SHAPE))]
    return ModelLoader.from_proto(model(nodes, [("x", F, list(SHAPE))], outs, inits))


def _want(x: np.ndarray, backend: BackendType) -> dict[str, np.ndarray]:
    x64, x10 = x.astype(np.float64), x * np.float32(10)
    if backend is BackendType.GPU_PIXEL:
        return {"sq": (x64 * x64).astype(np.float32), "pos": np.maximum(x, 0),
                "big": np.floor(x10)}
    return {"sq": (x64 * x64).astype(np.float32), "pos": x > 0,
            "big": np.trunc(x10).astype(np.int64)}


@pytest.fixture
def reads(monkeypatch):
    """The output reads by route: "staged" (copied by the run) or "copied" (copied now)."""
    seen: list[tuple[str, np.dtype]] = []
    inside_copied: list[bool] = []  # (a copied read maps through the staged route too)

    def spy(cls, copied_name, staged_name, dtype_of):
        copied, staged = getattr(cls, copied_name), getattr(cls, staged_name)

        def read_staged(self, *args, **kw):
            if not inside_copied:
                seen.append(("staged", dtype_of(args)))
            return staged(self, *args, **kw)

        def read_copied(self, *args, **kw):
            seen.append(("copied", dtype_of(args)))
            inside_copied.append(True)
            try:
                return copied(self, *args, **kw)
            finally:
                inside_copied.pop()

        monkeypatch.setattr(cls, staged_name, read_staged)
        monkeypatch.setattr(cls, copied_name, read_copied)

    spy(GpuDevice, "read_buffer_async", "read_staged_async", lambda a: np.dtype(a[2]))
    spy(Renderer, "read_texture", "read_staged_texture", lambda a: np.dtype(np.float32))
    return seen


def _outputs_read(seen) -> list[str]:
    """The routes of output reads (timestamps, read as uint64, left out)."""
    return [route for route, dtype in seen if dtype != np.dtype(np.uint64)]


def _replay(worker):
    (rep,) = worker._backend._replays._by_sig.values()
    return rep


@pytest.mark.parametrize("raw", [True, False], ids=["native", "public-api"])
def test_outputs_read_after_each_run_come_from_the_runs_copies(rng, reads, raw, monkeypatch,
                                                               GPU):
    if not raw:
        monkeypatch.setattr(replay_submit, "NATIVE", None)
        monkeypatch.setattr(pixel_submit, "NATIVE", None)
    m = _three_outputs(GPU)
    with Worker(m, GPU) as worker:
        for run in range(7):
            x = rng.standard_normal(SHAPE).astype(np.float32)
            worker.schedule({"x": x})
            want = _want(x, GPU)
            reads.clear()
            got = worker.peek_output("sq").download_to_array()
            np.testing.assert_allclose(got, want["sq"], rtol=1e-6)
            if run >= 3:  # replayed since the second run, read before: copied by the run
                assert _outputs_read(reads) == ["staged"], (run, reads)
            if run >= 4:  # "pos" read from the fifth run on: the first read copies it
                reads.clear()
                np.testing.assert_array_equal(worker.peek_output("pos").download_to_array(),
                                              want["pos"])
                assert _outputs_read(reads) == ["copied" if run == 4 else "staged"], reads
        assert _replay(worker).read_back == {"sq", "pos"}


def test_each_tensor_keeps_its_own_runs_values(rng, reads, GPU):
    """Several runs scheduled before any read; reads in reverse order, int64 included."""
    m = _three_outputs(GPU)
    with Worker(m, GPU) as worker:
        for _ in range(4):  # recorded, replayed, and each output read once
            worker.schedule({"x": rng.standard_normal(SHAPE).astype(np.float32)})
            for name in ("sq", "pos", "big"):
                worker.peek_output(name).download_to_array()
        xs, held = [], []
        for _ in range(3):
            xs.append(rng.standard_normal(SHAPE).astype(np.float32))
            worker.schedule({"x": xs[-1]})
            held.append({n: worker.peek_output(n) for n in ("sq", "pos", "big")})
        reads.clear()
        for x, tensors in reversed(list(zip(xs, held))):
            want = _want(x, GPU)
            for name, tensor in tensors.items():
                got = tensor.download_to_array()
                assert got.dtype == want[name].dtype
                np.testing.assert_allclose(got, want[name], rtol=1e-6)
        assert set(_outputs_read(reads)) == {"staged"}, reads


def test_outputs_no_longer_read_stop_being_copied(rng, reads, GPU):
    m = _three_outputs(GPU)
    with Worker(m, GPU) as worker:
        for _ in range(4):
            worker.schedule({"x": rng.standard_normal(SHAPE).astype(np.float32)})
            worker.peek_output("sq").download_to_array()
            worker.peek_output("big").download_to_array()
        rep = _replay(worker)
        assert rep.read_back == {"sq", "big"}
        for _ in range(3):  # "big" dropped unread: released before the next run's copies
            x = rng.standard_normal(SHAPE).astype(np.float32)
            worker.schedule({"x": x})
            np.testing.assert_allclose(worker.peek_output("sq").download_to_array(),
                                       _want(x, GPU)["sq"], rtol=1e-6)
        assert rep.read_back == {"sq"}
        # and a late read of an output that was not copied early still reads its own run
        x = rng.standard_normal(SHAPE).astype(np.float32)
        worker.schedule({"x": x})
        reads.clear()
        np.testing.assert_array_equal(worker.peek_output("big").download_to_array(),
                                      _want(x, GPU)["big"])
        assert _outputs_read(reads) == ["copied"]


def test_outputs_read_after_the_worker_closed(rng, GPU):
    """close() reads live outputs back first: the early copies serve those reads too."""
    m = _three_outputs(GPU)
    worker = Worker(m, GPU)
    for _ in range(4):
        x = rng.standard_normal(SHAPE).astype(np.float32)
        worker.schedule({"x": x})
        worker.peek_output("pos").download_to_array()
    x = rng.standard_normal(SHAPE).astype(np.float32)
    worker.schedule({"x": x})
    tensors = {n: worker.peek_output(n) for n in ("sq", "pos", "big")}
    worker.close()
    want = _want(x, GPU)
    for name, tensor in tensors.items():
        np.testing.assert_allclose(tensor.download_to_array(), want[name], rtol=1e-6)


def test_blocking_reads_of_copied_outputs_map_on_the_calling_thread(rng, GPU, monkeypatch):
    """download_to_array of an output its run copied out maps and waits on the reader's
    own thread (no engine-thread job, no reader-thread hand-over); a non-blocking
    readback_request still goes through the reader thread; both get their run's values."""
    from engine.backends.gpu_common.readback import Reader

    routes: list[str] = []
    now, queued = Reader.read_now, Reader.read
    monkeypatch.setattr(Reader, "read_now",
                        lambda self, *a, **k: routes.append("now") or now(self, *a, **k))
    monkeypatch.setattr(Reader, "read",
                        lambda self, *a, **k: routes.append("queued") or queued(self, *a, **k))
    m = _three_outputs(GPU)
    with Worker(m, GPU) as worker:
        for _ in range(4):
            worker.schedule({"x": rng.standard_normal(SHAPE).astype(np.float32)})
            worker.peek_output("sq").download_to_array()
        for blocking in (True, False, True):
            x = rng.standard_normal(SHAPE).astype(np.float32)
            worker.schedule({"x": x})
            routes.clear()
            tensor = worker.peek_output("sq")
            if not blocking:
                tensor.readback_request()
                got = tensor.readback_and_clone().download_to_array()
            else:
                got = tensor.download_to_array()
            np.testing.assert_allclose(got, _want(x, GPU)["sq"], rtol=1e-6)
            # (a sampled run's timestamps are read through the reader thread too)
            assert routes[0] == ("now" if blocking else "queued"), routes


def test_outputs_read_on_another_thread_while_runs_are_scheduled(rng, GPU):
    """Reads from a second thread of tensors whose runs are already submitted, while the
    first thread schedules more runs: every tensor has its own run's values."""
    from concurrent.futures import ThreadPoolExecutor

    m = _three_outputs(GPU)
    with Worker(m, GPU) as worker, ThreadPoolExecutor(1) as pool:
        for _ in range(4):
            worker.schedule({"x": rng.standard_normal(SHAPE).astype(np.float32)})
            worker.peek_output("sq").download_to_array()
        pending = []
        for _ in range(12):
            x = rng.standard_normal(SHAPE).astype(np.float32)
            worker.schedule({"x": x})
            tensor = worker.peek_output("sq")
            pending.append((x, pool.submit(tensor.download_to_array)))
        for x, fut in pending:
            np.testing.assert_allclose(fut.result(timeout=60), _want(x, GPU)["sq"], rtol=1e-6)

"""Test set-up: offscreen Qt, a private XDG runtime dir, and the GPU-adapter policy.

GPU tests need a wgpu adapter (lavapipe in CI). In CI (``CI`` set) a missing adapter
is a failure; elsewhere those tests are skipped with the reason printed.
"""

import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
if not os.environ.get("XDG_RUNTIME_DIR"):
    _rt = tempfile.mkdtemp(prefix="xdg-")
    os.chmod(_rt, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = _rt

import numpy as np  # noqa: E402
import pytest  # noqa: E402

_ADAPTER: tuple[bool, str] | None = None


def gpu_adapter_status() -> tuple[bool, str]:
    """(available, reason) for a wgpu adapter, probed once."""
    global _ADAPTER
    if _ADAPTER is None:
        try:
            from engine.backends.gpu_common import get_device

            dev = get_device()
            _ADAPTER = (True, dev.name)
        except Exception as exc:  # report, never crash collection
            _ADAPTER = (False, f"{type(exc).__name__}: {exc}")
    return _ADAPTER


@pytest.fixture
def require_gpu():
    """Use in GPU tests: fails in CI without an adapter, skips (with the reason) elsewhere."""
    ok, reason = gpu_adapter_status()
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have a GPU adapter (lavapipe): {reason}")
        print(f"\nskipping GPU test: no adapter ({reason})")
        pytest.skip(f"no GPU adapter: {reason}")
    return reason


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def nthreads(request):
    """The CPU backend's kernels on one thread, then on two (split paths)."""
    from engine.backends.cpu import threads

    before = threads.threads()
    threads.set_threads(request.param)
    yield request.param
    threads.set_threads(before)


@pytest.fixture
def rng():
    """Fresh random data every run; the seed is printed so a failure can be replayed."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture
def window(qtbot, tmp_path):
    """A shown workbench MainWindow with private settings, once every backend is probed."""
    from PySide6.QtCore import QSettings

    from workbench.main_window import MainWindow

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitUntil(lambda: all(r != "checking…" for r in w.backend_status.values()),
                    timeout=60_000)
    yield w
    w.stop_run()
    w.controller.shutdown()

"""Stopping: queued engine work is dropped on exit, Ctrl-C closes the workbench."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from engine import executor
from engine.errors import EngineError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_cancel_pending_drops_queued_jobs_not_the_running_one():
    gate, started, ran = threading.Event(), threading.Event(), []

    def hold():
        started.set()
        return gate.wait(30)

    running = executor.submit(hold)
    assert started.wait(30)  # cancel only once it runs: a started job is never dropped
    queued = [executor.submit(ran.append, i) for i in range(5)]
    executor.cancel_pending()
    later = executor.submit(ran.append, "after")
    gate.set()
    assert running.result(timeout=30) is True
    for f in queued:
        with pytest.raises(EngineError, match="cancelled"):
            f.result(timeout=30)
    later.result(timeout=30)
    assert ran == ["after"]


def test_exit_does_not_drain_queued_runs():
    script = textwrap.dedent("""
        import time
        import numpy as np
        from engine import BackendType, ModelLoader, Worker, executor
        from workbench.paths import DEMO_MODEL
        worker = Worker(ModelLoader.load(DEMO_MODEL), BackendType.CPU)
        worker.schedule(np.zeros((1, 1, 8, 8), np.float32))
        worker.peek_output().download_to_array()
        for _ in range(80):  # 20 s of queued work if the exit waited for it
            executor.submit(time.sleep, 0.25)
            worker.schedule(np.zeros((1, 1, 8, 8), np.float32))
        print("queued", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    t0 = time.perf_counter()
    out, err = proc.communicate(timeout=120)
    assert line.strip() == "queued" and proc.returncode == 0, err
    assert time.perf_counter() - t0 < 8, "the exit drained the queued work"
    assert "Traceback" not in err, err


def test_ctrl_c_closes_the_workbench():
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.Popen([sys.executable, "-m", "workbench"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(10)  # the window is up (Qt's event loop runs)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err

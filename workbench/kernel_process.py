"""Compiling a model's CPU kernels in a helper process before the window's process runs it.

Numba's compiler holds the interpreter lock in long stretches: while the Conv kernels
compiled, a thread waking every 5 ms waited up to 508 ms (58 waits over 200 ms in 95 s), so
the first run of a model after an install or an upgrade froze the window whichever thread
compiled (a compare of densenet121 on a cold cache: 560-617 ms). When an op type of the model
has no mark in the kernel cache (``kernel_cache.uncompiled``), a helper (``python -m
workbench.kernel_process MODEL``) runs the model on the CPU backend once as a run does and
once with every tensor captured (as a compare does), which compiles what those runs need
into the cache both processes share, and marks the model's op types; the window's process
then loads those kernels from the cache. A model whose op types are all marked starts no
helper.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: longest wait for the helper (a cold compile of every kernel took 150 s here)
TIMEOUT_S = 1800.0


def needs_helper(model) -> bool:
    """Whether some op type of ``model`` has no compiled kernels in the cache yet."""
    from engine.backends.cpu import kernel_cache

    return bool(kernel_cache.uncompiled(_op_types(model)))


def compile_ahead(path: str | None, model, progress: Callable[[str, float], None] | None = None
                  ) -> bool:
    """Compile ``model``'s CPU kernels (from the file at ``path``) in a helper process when
    the cache lacks some; blocks the calling (non-UI) thread until it ends, without holding
    the interpreter lock. Returns whether a helper ran and succeeded; on any failure the
    caller's process compiles what it needs itself, as before."""
    if not path or not os.path.isfile(path) or not needs_helper(model):
        return False
    if progress is not None:
        progress("Compiling CPU kernels in a helper process (first use after an install or "
                 "an upgrade)…", -1.0)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        done = subprocess.run([sys.executable, "-m", "workbench.kernel_process", path],
                              env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _op_types(model) -> set[str]:
    return {layer.op_type for layer in model.layers}


def _compile(path: str) -> int:
    """The helper's work: both runs of the model at ``path`` on the CPU, then the marks."""
    from engine import ModelLoader, Worker
    from engine.backends.cpu import kernel_cache
    from engine.inputs import random_feeds

    model = ModelLoader.load(path)
    try:
        feeds = random_feeds(model, seed=0)
        with Worker(model, "cpu") as worker:
            worker.schedule(feeds)
            for out in model.outputs:
                worker.peek_output(out.name).download_to_array()
            for _ in worker.schedule_iterable(feeds, capture="all"):
                pass
    finally:
        # marked even when a run failed part way (an op the CPU lacks fails in the window
        # too): no helper again for this model
        kernel_cache.mark_compiled(_op_types(model))
    return 0


if __name__ == "__main__":
    sys.exit(_compile(sys.argv[1]))

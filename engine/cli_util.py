"""Helpers of the command line (``engine.cli``): --seed, strict JSON, the process
environment (XDG_RUNTIME_DIR, Ctrl-C), load measurements and aligned text tables.
(Random inputs are ``engine.inputs``.)"""

from __future__ import annotations

import math
import os
import resource
import sys
import tempfile
import time

import numpy as np

BACKEND_NAMES = "cpu, gpu-compute or gpu-pixel"


def seed_arg(text: str) -> int:
    """argparse type of ``--seed``: an integer from 0 to 2**32 - 1."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to {2**32 - 1}, "
                                         f"got {text!r}")
    return value


def strict_json(value):
    """``value`` with NaN and infinities replaced by None: valid JSON for ``allow_nan=False``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    if isinstance(value, np.generic):
        return strict_json(value.item())
    return value


def dumps(value, **kwargs) -> str:
    import json

    return json.dumps(strict_json(value), allow_nan=False, **kwargs)


def ensure_runtime_dir() -> None:
    """Point XDG_RUNTIME_DIR at a private folder when it is unset or unusable, before wgpu
    loads: otherwise the Vulkan/Mesa loaders print lines that look like the CLI's errors."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and _private_dir(current):
        return
    path = os.path.join(tempfile.gettempdir(), f"inference-engine-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        path = ""
    if not path or not _private_dir(path):
        path = tempfile.mkdtemp(prefix="inference-engine-")
    os.environ["XDG_RUNTIME_DIR"] = path


def _private_dir(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return os.path.isdir(path) and st.st_uid == os.getuid() and st.st_mode & 0o077 == 0


def exit_interrupted() -> None:
    """After Ctrl-C: one line, exit status 130, without waiting for the engine thread."""
    try:
        sys.stdout.flush()
    except Exception:
        pass
    print("interrupted", file=sys.stderr, flush=True)
    os._exit(130)


def quiet_stdout() -> None:
    """Send what is left of stdout to /dev/null (its reader closed the pipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def peak_rss_bytes() -> int:
    """The process's peak resident memory so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def timed_load(path: str):
    """``ModelLoader.load(path)`` with a line about its time and peak memory."""
    from engine import ModelLoader

    before = peak_rss_bytes()
    t0 = time.perf_counter()
    model = ModelLoader.load(path)
    seconds = time.perf_counter() - t0
    peak = peak_rss_bytes()
    line = (f"load: {seconds:.2f} s, peak memory {peak / 2**20:.0f} MiB "
            f"(process high-water mark; {before / 2**20:.0f} MiB before the load)")
    return model, line


def table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> str:
    """Rows of cells as aligned text columns (columns in ``right`` right-aligned)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])

"""Helpers of the replay tests of both GPU backends: the host-cost model builders, one run
read back, and a worker's single replay status."""

from __future__ import annotations

import importlib.util
import os


def builders():
    """``scripts/host_cost_models.py`` as a module (small models shaped like the families)."""
    path = os.path.join(os.path.dirname(__file__), "..", "scripts", "host_cost_models.py")
    spec = importlib.util.spec_from_file_location("host_cost_models", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_once(worker, feeds):
    """Schedule ``feeds`` and read the first output back."""
    worker.schedule(feeds)
    return worker.peek_output().download_to_array()


def replay_status(worker) -> str:
    """The status of the worker's one input signature ("replayed", "recording" or why not)."""
    (status,) = worker._backend.replay_status.values()
    return status

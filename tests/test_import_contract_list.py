"""The import contract keeping GPU backends off CPU kernels names every CPU kernel module:
a new ``kernels_*.py`` left out of it would be importable by a GPU backend unnoticed."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_contract_forbids_every_cpu_kernel_module():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if "engine.backends.gpu_compute" in c.get("source_modules", []))
    listed = set(contract["forbidden_modules"])
    modules = {f"engine.backends.cpu.{p.stem}"
               for p in (ROOT / "engine" / "backends" / "cpu").glob("kernels_*.py")}
    assert modules - listed == set(), sorted(modules - listed)

"""Import every module of a package whose name starts with a prefix (registration by import)."""

from __future__ import annotations

import importlib
import pkgutil


def import_submodules(package: str, path, prefix: str = "") -> list[str]:
    names = sorted(m.name for m in pkgutil.iter_modules(path) if m.name.startswith(prefix)
                   and not m.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{package}.{name}")
    return names

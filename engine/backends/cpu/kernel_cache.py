"""Where Numba keeps the CPU kernels it compiled: one folder per version of their sources.

Numba checks a cached kernel against its own source file only. A kernel that calls a helper
from another file (every epilogue, ``spin.claim``, the SIMD intrinsics) keeps its old
machine code after that helper changes, so an upgrade or an edit could run yesterday's
helper inside today's kernel (the GELU epilogue of the linear layers kept its old form
until the cache was cleared by hand). ``configure`` points Numba's cache at a folder named
after a digest of every source file of this package while the package's modules are
imported (each kernel takes its cache folder when it is defined; the user's own Numba
functions keep theirs); changed sources get a fresh folder (and compile again once), and
older folders are pruned. A ``NUMBA_CACHE_DIR`` the user set is left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil

#: folders of earlier source versions kept beside the current one (another installed copy
#: of the engine may still use them)
KEEP = 2


def source_digest(folder: str) -> str:
    """A digest of the names and contents of the ``.py`` files in ``folder``."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            digest.update(name.encode())
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def cache_root() -> str:
    """The folder holding one cache folder per source version."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "inference-workbench", "numba")


def _prune(root: str, current: str) -> None:
    """Remove all but the ``KEEP`` most recently used other version folders."""
    try:
        others = [os.path.join(root, n) for n in os.listdir(root) if n != current]
        others = [p for p in others if os.path.isdir(p)]
        others.sort(key=os.path.getmtime, reverse=True)
    except OSError:
        return
    for path in others[KEEP:]:
        shutil.rmtree(path, ignore_errors=True)


def version_folder(folder: str | None = None, version: str | None = None) -> str | None:
    """This source version's cache folder, made if need be (older ones pruned); None when
    the user chose a folder (``NUMBA_CACHE_DIR``) or none can be made. ``version``: the
    sources' digest when already known."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    root = cache_root()
    version = version or source_digest(folder or os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, version)
    try:
        os.makedirs(path, exist_ok=True)
        os.utime(path)  # (most recently used: kept by ``_prune``)
    except OSError:
        return None  # Numba's own default then
    _prune(root, version)
    return path


@contextlib.contextmanager
def kernels_cached(folder: str | None = None):
    """Kernels defined inside this block cache in ``version_folder`` (Numba's default
    when it gives None)."""
    import numba

    digest = source_digest(folder or os.path.dirname(os.path.abspath(__file__)))
    path = version_folder(folder, digest)
    _active.update(folder=path, digest=digest)
    before = numba.config.CACHE_DIR
    if path is not None:
        numba.config.CACHE_DIR = path
    try:
        yield path
    finally:
        numba.config.CACHE_DIR = before


#: the cache folder of this process's kernels and their sources' digest (``kernels_cached``)
_active: dict[str, str | None] = {"folder": None, "digest": None}


def marks_folder() -> str | None:
    """The folder naming the op types whose kernels a whole model run has compiled into this
    cache (``mark_compiled``), per version of the sources and of Numba; None without a cache
    folder."""
    import numba

    folder = os.environ.get("NUMBA_CACHE_DIR") or _active["folder"]
    if not folder or not _active["digest"]:
        return None
    return os.path.join(folder, f"compiled-{_active['digest']}-numba{numba.__version__}")


def _mark(op_type: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in op_type) or "_"


def uncompiled(op_types) -> set[str]:
    """The op types among ``op_types`` that no model run has compiled kernels for in this
    cache yet (empty without a cache folder: nothing could be compiled ahead)."""
    folder = marks_folder()
    if folder is None:
        return set()
    try:
        have = set(os.listdir(folder))
    except OSError:
        have = set()
    return {op for op in op_types if _mark(op) not in have}


def mark_compiled(op_types) -> None:
    """Record that a model run compiled the kernels of ``op_types`` into this cache."""
    folder = marks_folder()
    if folder is None:
        return
    try:
        os.makedirs(folder, exist_ok=True)
        for op in op_types:
            with open(os.path.join(folder, _mark(op)), "a"):
                pass
    except OSError:  # a read-only cache: the window's process compiles, as it always could
        pass

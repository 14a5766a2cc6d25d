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


def version_folder(folder: str | None = None) -> str | None:
    """This source version's cache folder, made if need be (older ones pruned); None when
    the user chose a folder (``NUMBA_CACHE_DIR``) or none can be made."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    root = cache_root()
    version = source_digest(folder or os.path.dirname(os.path.abspath(__file__)))
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

    path = version_folder(folder)
    before = numba.config.CACHE_DIR
    if path is not None:
        numba.config.CACHE_DIR = path
    try:
        yield path
    finally:
        numba.config.CACHE_DIR = before

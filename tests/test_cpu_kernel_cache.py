"""The CPU kernels' compiled code is cached per version of the backend's sources
(``kernel_cache``): a change to any file, helpers included, gets a fresh folder."""

from __future__ import annotations

import os

from engine.backends.cpu import conv_pointwise, kernel_cache


def _package(tmp_path, files: dict[str, str]) -> str:
    folder = tmp_path / "pkg"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return str(folder)


def test_any_source_change_changes_the_version(tmp_path):
    folder = _package(tmp_path, {"a.py": "x = 1\n", "b.py": "y = 2\n", "notes.txt": "n"})
    first = kernel_cache.source_digest(folder)
    assert kernel_cache.source_digest(folder) == first
    _package(tmp_path, {"notes.txt": "changed"})  # not a source file
    assert kernel_cache.source_digest(folder) == first
    _package(tmp_path, {"b.py": "y = 3\n"})  # a helper in another file
    assert kernel_cache.source_digest(folder) != first


def test_version_folders_are_made_and_old_ones_pruned(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = _package(tmp_path, {"a.py": "v = 0\n"})
    made = []
    for v in range(5):
        _package(tmp_path, {"a.py": f"v = {v}\n"})
        path = kernel_cache.version_folder(folder)
        assert os.path.isdir(path) and path.startswith(kernel_cache.cache_root())
        os.utime(path, (v, v))  # each older than the next
        made.append(path)
    os.utime(made[-1])
    kept = set(os.listdir(kernel_cache.cache_root()))
    # the current one and the KEEP most recent others
    assert kept == {os.path.basename(p) for p in made[-1 - kernel_cache.KEEP:]}


def test_a_folder_the_user_chose_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert kernel_cache.version_folder(_package(tmp_path, {"a.py": ""})) is None
    with kernel_cache.kernels_cached() as path:
        assert path is None


def test_the_backend_kernels_cache_in_their_version_folder():
    """(Or in the folder the user chose, when NUMBA_CACHE_DIR is set.)"""
    here = os.path.dirname(os.path.abspath(kernel_cache.__file__))
    want = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        kernel_cache.cache_root(), kernel_cache.source_digest(here))
    assert conv_pointwise.pw_tasks._cache._cache_path.startswith(want)

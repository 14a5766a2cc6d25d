"""Loading models in a helper process, so the UI's interpreter lock stays free.

ONNX parsing, checking and shape inference run in C++ while holding the GIL: in-process they
stall the window for hundreds of milliseconds on a large model, whatever thread calls them.
A helper process (``python -m workbench.model_process``, started with the window and warmed
up, so the first drop does not pay for its imports) does the whole import and sends the
``Model`` back pickled over a pipe, with its graph layout (pure Python work that would
otherwise hold the lock in the controller thread); unpickling takes a few milliseconds. A fresh
interpreter (not ``multiprocessing``) keeps the app's main module out of the helper. If the
helper cannot start or dies, loading falls back to the calling thread.
"""

from __future__ import annotations

import json
import mmap
import os
import pickle
import struct
import subprocess
import sys
import threading
import time

from engine import ModelLoader, ModelLoadError

_HEADER = struct.Struct("<Q")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read_into(stream, n: int) -> bytearray:
    """``n`` bytes from ``stream`` into a fresh buffer (the reads release the GIL)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = stream.readinto(view[got:])
        if not k:
            raise EOFError("the model loader process ended")
        got += k
    return buf


def _read_exact(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the model loader process ended")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class ModelProcess:
    """One warm helper process that loads models; ``load`` blocks its (non-UI) caller."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self.in_process = False  # True once the helper failed: load in the caller instead
        self._closed = False

    def start(self) -> None:
        """Start the helper (it imports the loader while the window opens)."""
        with self._lock:
            if self._proc is not None or self.in_process:
                return
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                [ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "workbench.model_process"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, env=env, cwd=ROOT)
            except OSError:
                self.in_process = True

    def load(self, path: str):
        """The ``Model`` at ``path``; raises ``ModelLoadError`` like ``ModelLoader.load``."""
        return self.load_with_layout(path)[0]

    def load_with_layout(self, path: str):
        """(Model, ``GraphLayout``, layout ms, preprocess, labels) for ``path``; raises
        ``ModelLoadError``."""
        self.start()
        proc = self._proc
        if proc is None:
            return _load_and_lay_out(path)
        try:
            data = path.encode("utf-8")
            proc.stdin.write(_HEADER.pack(len(data)) + data)
            proc.stdin.flush()
            (size,) = _HEADER.unpack(_read_exact(proc.stdout, _HEADER.size))
            data = _read_exact(proc.stdout, size)
            (count,) = _HEADER.unpack(_read_exact(proc.stdout, _HEADER.size))
            buffers = []
            for _ in range(count):
                (n,) = _HEADER.unpack(_read_exact(proc.stdout, _HEADER.size))
                buffers.append(_read_into(proc.stdout, n))
            # arrays come back as views of the buffers read above: no big copy under the GIL
            answer = pickle.loads(data, buffers=buffers)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError):
            if self._closed:
                raise ModelLoadError("the workbench is closing") from None
            # the helper died (a crash inside a native library, out of memory): load here
            self.close()
            self._closed = False
            self.in_process = True
            return _load_and_lay_out(path)
        if answer[0] == "error":
            raise ModelLoadError(answer[1])
        if answer[0] == "local":  # memory-mapped weights: map them here, copying nothing
            return _load_and_lay_out(path)
        return answer[1:]

    def close(self) -> None:
        """Stop the helper (a load in progress is abandoned)."""
        self._closed = True
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            proc.kill()
            proc.wait(timeout=5)


def read_model_metadata(model) -> tuple[dict | None, list[str] | None]:
    """Preprocessing recipe and class labels stored in the loaded model's metadata."""
    props = getattr(model, "metadata", None) or {}
    try:
        pre = json.loads(props["workbench.preprocess"]) if "workbench.preprocess" in props else None
        labels = json.loads(props["workbench.labels"]) if "workbench.labels" in props else None
        return pre, labels
    except (ValueError, TypeError):  # metadata is optional; a bad entry is ignored
        return None, None


def _load_and_lay_out(path: str):
    """(Model, GraphLayout, layout ms, preprocess, labels), here."""
    from workbench.layout import compute_layout

    model = ModelLoader.load(path)
    t0 = time.perf_counter()
    layout = compute_layout(model)
    ms = (time.perf_counter() - t0) * 1e3
    return (model, layout, ms, *read_model_metadata(model))


def _mapped(value) -> bool:
    """True for an array whose memory is a mapped file (external weights)."""
    base = getattr(value, "base", None)
    while base is not None:
        if isinstance(base, memoryview):
            base = base.obj
        if isinstance(base, mmap.mmap):
            return True
        base = getattr(base, "base", None)
    return False


def _serve() -> None:
    """The helper's loop: read a path, answer ("ok", Model) or ("error", message)."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the pipe
    import engine.onnx_import  # noqa: F401 - warm: the first load should not pay for imports
    import engine.passes  # noqa: F401
    import workbench.layout  # noqa: F401

    while True:
        try:
            (size,) = _HEADER.unpack(_read_exact(sys.stdin.buffer, _HEADER.size))
            path = _read_exact(sys.stdin.buffer, size).decode("utf-8")
        except EOFError:
            return
        try:
            answer = ("ok", *_load_and_lay_out(path))
            if any(_mapped(v) for v in answer[1].constants.values()):
                # external weights are mapped from their files: sending them would copy them
                answer = ("local",)
        except ModelLoadError as exc:
            answer = ("error", str(exc))
        except Exception as exc:  # the app shows it as a load error
            answer = ("error", f"{type(exc).__name__}: {exc}")
        buffers: list[pickle.PickleBuffer] = []
        try:
            data = pickle.dumps(answer, protocol=5, buffer_callback=buffers.append)
        except Exception as exc:  # an unpicklable model is still an answer
            buffers = []
            data = pickle.dumps(("error", f"cannot hand the model over: {exc}"), protocol=5)
        out.write(_HEADER.pack(len(data)) + data + _HEADER.pack(len(buffers)))
        for buf in buffers:
            raw = buf.raw()
            out.write(_HEADER.pack(raw.nbytes))
            out.write(raw)
        out.flush()


if __name__ == "__main__":
    _serve()

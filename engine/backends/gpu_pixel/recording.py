"""Recording one GPU_PIXEL run of a plan, so that later runs of its signature replay it.

While a normal run executes, the renderer reports every texture it hands out, every queue
write, pass and texture copy. At the end of the run the recorder checks that nothing it saw
depends on input *values* (the rules are GPU_COMPUTE's: only static CPU layers, no kernel
reading a non-static host value) and ``replay.build`` turns the trace into a ``PixelReplay``.

One rule is wider than GPU_COMPUTE's: CPU layers computing only on model inputs and constants
(the *host prefix*: an attention mask reshaped and cast on the CPU because textures hold
float32 only) are allowed; a replayed run runs them again on its inputs, then uploads.

Model inputs and host-prefix values reach the backend as host arrays that are written into
a texture when a kernel first needs it. While recording, their handles are ``FeedTensor``s:
the texture write is recognised as an input (rewritten by every replayed run), and a kernel
reading the host array itself (``handle.host``) is reported as value-dependent, except
through the backend's ``host_dtype``/``as_float32`` helpers, whose conversion the replay
repeats.
"""

from __future__ import annotations

from engine.backends.gpu_common.guards import check_runs, host_prefix
from engine.backends.gpu_compute.recording import Recorder
from engine.backends.gpu_pixel.handles import PixelTensor

_HOST = PixelTensor.host  # the slot itself: reads through it are not watched


def raw_host(handle: PixelTensor):
    """``handle``'s host array without reporting the read (backend internals)."""
    return _HOST.__get__(handle)


class FeedTensor(PixelTensor):
    """A host array's handle while a run is recorded: reading ``host`` reports it once the
    array is known to be an input or a host-prefix value (``feed``: its name)."""

    __slots__ = ("feed", "hits")

    def __init__(self, layout, host, feed: str | None, hits: list[str]):
        super().__init__(layout, None, host)
        self.feed, self.hits = feed, hits

    @property
    def host(self):
        if self.feed is not None:
            self.hits.append(self.feed)
        return _HOST.__get__(self)

    @host.setter
    def host(self, value):
        _HOST.__set__(self, value)


class PixelRecorder(Recorder):
    """The textures, writes, passes and copies of one run, in order."""

    def __init__(self, model, plan, feeds: dict):
        super().__init__(model, plan, feeds)
        self.static, self.prefix, self.reason = host_prefix(model, plan.placement, feeds)
        self.inputs = set(feeds)
        self.prefix_names = {o for layer in self.prefix for o in layer.outputs if o}
        self.constants = {id(v) for v in model.constants.values()}
        if len(self.feeds) < len(feeds) and not self.reason:
            self.reason = "two inputs were given the same array"
        #: id(host array) -> (input name, dtype to convert to or None, shape or None)
        self.sources: dict[int, tuple[str, object]] = {
            k: (name, None, None) for k, name in self.feeds.items()}
        self.allocated_tex: list = []  # textures the pool handed out during the run

    # -- events from the backend and the renderer -------------------------------------------
    def feed_handle(self, layout, array) -> PixelTensor | None:
        """A watched handle for ``array`` unless it is a model constant (None)."""
        if id(array) in self.constants:
            return None
        return FeedTensor(layout, array, self.feeds.get(id(array)), self.hits)

    def watch_handles(self, layer, handles: list) -> None:
        """Name the host-prefix values among a GPU layer's input handles."""
        for name, h in zip(layer.all_inputs(), handles):
            if name in self.prefix_names and isinstance(h, FeedTensor) and h.feed is None:
                h.feed = name
                self.sources[id(raw_host(h))] = (name, None, None)

    def converted(self, source: PixelTensor, array, dtype, shape=None) -> None:
        """``array`` is ``source``'s host array converted to ``dtype`` and/or reshaped to
        ``shape`` (by the backend)."""
        if isinstance(source, FeedTensor) and source.feed is not None:
            self.sources[id(array)] = (source.feed, dtype, shape)
            self.keep.append(array)

    def took(self, tex) -> None:
        self.allocated_tex.append(tex)

    def wrote(self, tex, texels, source) -> None:
        feed = self.sources.get(id(source)) if source is not None else None
        self.events.append(("write", tex, feed, None if feed else texels.copy()))

    def drew(self, label: str, pipe, out, textures: list, params: bytes) -> None:
        self.events.append(("draw", label, pipe, out, list(textures), params))

    def drew_targets(self, label: str, pipe, outs: list, textures: list, params: bytes,
                     width: int) -> None:
        """A pass writing columns [0, width) of several targets, keeping the rest."""
        self.events.append(("draw", label, pipe, outs[0], list(textures), params,
                            list(outs), width))

    def copied(self, src, dst, y: int) -> None:
        self.events.append(("copy", self.layer, src, dst, y))

    def copied_columns(self, src, dst, x: int, width: int) -> None:
        self.events.append(("copy", self.layer, src, dst, 0, x, width))

    # -- the end of the run -----------------------------------------------------------------
    def problem(self, outputs: dict) -> str | None:
        """Why this recording cannot be replayed (None: it can)."""
        if self.reason:
            return self.reason
        if self.hits:
            return f"a GPU kernel reads the value of {self.hits[0]!r} (not fixed by the shapes)"
        why = host_prefix(self.model, self.plan.placement, self.inputs)[2]
        if why:  # placement may have changed during the run
            return why
        self.guards, why = check_runs(self.model, self.plan.placement, self.watched,
                                      self.gpu_layers, self.host_values())
        if why:
            return why
        made = {id(t) for t in self.allocated_tex}
        for name, slot in outputs.items():
            if slot is None or slot.dev is None or getattr(slot.dev, "tex", None) is None \
                    or id(slot.dev.tex) not in made:
                return f"output {name!r} is not computed on the device"
        return None


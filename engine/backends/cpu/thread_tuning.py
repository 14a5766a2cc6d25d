"""Which CPU layers run on one thread: measured per layer in a worker's first runs.

Splitting a layer over the cores pays where its multiply-adds dominate and costs where it
streams memory that one core's cache already holds: the other core then reads its half
from there and the hand-off adds its own microseconds. On the 2-core AMD EPYC this was
measured on, within one worker (all layers on one thread against all on two, alternated
block by block), two threads made ResNet-50 42% faster, SqueezeNet 30%, BERT 18% and YOLO
7%, while MobileNetV3 ran 3.7% and the CRNN 1.9% slower; inside MobileNetV3 nearly every
layer, its 3-channel stem included (+17%), ran faster alone. Where the line falls depends
on the machine, so it is measured rather than set. After a few runs of an input signature
(its plans made), the run loop's next runs alternate between all layers on one thread and
all on the backend's threads (A B B A, so slow stretches of a shared machine fall on both);
each layer's times are kept, and a layer is chosen to run on one thread when its median
there is lower by at least ``MARGIN``. A layer far faster split (``CLEAR``) or too short to
matter (``TINY_S``) is settled after two runs of each kind. Layers alone change what the
next ones find in their caches (and let the pool's helper go to sleep), so the mix is then
timed against every layer split, whole runs alternated the same way, and kept only when it
is faster by ``KEEP_MARGIN``. One thread here means ``threads.set_serial``: the layer's
kernels run every chunk on the calling thread, with the same tiling and so the same
results.
"""

from __future__ import annotations

import numpy as np

#: tune (False: every layer uses the backend's threads; tests and benchmarks)
ENABLED = True
#: runs of a new input signature before the tuning starts (plans, packed weights, caches;
#: every other one on one thread, which loads kernels of its own)
SKIP = 4
#: most tuning runs per input signature (half on one thread)
RUNS = 16
#: a layer runs alone when its median time there is below (1 - MARGIN) x the split one
MARGIN = 0.03
#: runs comparing the chosen mix with every layer split (half each)
VERIFY = 12
#: the mix is kept when its median run is below (1 - KEEP_MARGIN) x the all-split one
KEEP_MARGIN = 0.02
#: settled as split after two runs of each kind when alone takes this many times longer
CLEAR = 1.25
#: settled as split (nothing to gain) when both medians are below this many seconds
TINY_S = 3e-6


class ThreadTuner:
    """Per-step thread choice of one run loop's steps (``run_loops.run_on_cpu``)."""

    __slots__ = ("key", "runs", "mode", "alone", "split", "choice", "final", "mix",
                 "mixed", "plain")

    def __init__(self):
        self.key = None
        self.final: list[bool] | None = None

    def _reset(self, key, steps: int) -> None:
        self.key, self.runs, self.mode = key, -SKIP, False
        self.alone: list[list[float]] = [[] for _ in range(steps)]
        self.split: list[list[float]] = [[] for _ in range(steps)]
        self.choice: list[bool | None] = [None] * steps  # True: one thread
        self.final = self.mix = None
        self.mixed: list[float] = []
        self.plain: list[float] = []

    def modes(self, key, steps: int) -> list[bool] | None:
        """Per step, whether it runs on one thread in this run; None: all split (no step was
        found faster alone)."""
        if key != self.key or (self.final is None and len(self.choice) != steps):
            self._reset(key, steps)
        if self.final is not None:
            return self.mix  # the kept mix, or None
        if self.runs < 0:  # warming up, both ways (one thread loads kernels of its own)
            self.mode = self.runs % 2 == 1
            return [self.mode] * steps if self.mode else None
        self.mode = self.runs % 4 in (1, 2)  # A B B A: split, alone, alone, split
        if self.mix is not None:  # the mix against all split
            return self.mix if self.mode else None
        mode = self.mode
        return [mode if c is None else c for c in self.choice]

    def record(self, marks: list[float]) -> None:
        """Book this run's per-step times (``marks``: each step's start and end clock)."""
        if self.final is not None:
            return
        if self.runs < 0:
            self.runs += 1
            return
        if self.mix is not None:
            (self.mixed if self.mode else self.plain).append(marks[-1] - marks[0])
            self.runs += 1
            if len(self.mixed) + len(self.plain) >= VERIFY:
                keep = np.median(self.mixed) < (1 - KEEP_MARGIN) * np.median(self.plain)
                self.final = self.mix if keep else [False] * len(self.mix)
                self.mix = self.mix if keep else None
            return
        times = self.alone if self.mode else self.split
        for k, c in enumerate(self.choice):
            if c is None:
                times[k].append(marks[2 * k + 1] - marks[2 * k])
        self.runs += 1
        if self.runs % 2 == 0:
            self._settle(last=self.runs >= RUNS)

    def _settle(self, last: bool) -> None:
        for k, c in enumerate(self.choice):
            if c is not None or len(self.alone[k]) < 2 or len(self.split[k]) < 2:
                continue
            alone, split = float(np.median(self.alone[k])), float(np.median(self.split[k]))
            if alone > CLEAR * split or max(alone, split) < TINY_S:
                self.choice[k] = False
            elif last:
                self.choice[k] = alone < (1 - MARGIN) * split
        if last or all(c is not None for c in self.choice):
            mix = [bool(c) for c in self.choice]
            self.alone = self.split = []  # (the samples are not needed any more)
            if any(mix):  # layers alone change what the others find in their caches
                self.mix, self.runs = mix, 0
            else:
                self.final, self.mix = mix, None

    def summary(self) -> dict:
        """What the tuning found: ``{"tuned": bool, "alone": steps on one thread}``."""
        if self.final is None:
            return {"tuned": False, "alone": 0}
        return {"tuned": True, "alone": sum(self.final)}

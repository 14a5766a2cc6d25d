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
all on the backend's threads (A B B A, so slow stretches of a shared machine fall on both;
the first run alone is not timed: it loads the one-thread kernels);
each layer's times are kept, and a layer is chosen to run on one thread when its median
there is lower by at least ``MARGIN``. A layer far faster split (``CLEAR``) or too short to
matter (``TINY_S``) is settled after two runs of each kind. Layers alone change what the
next ones find in their caches (and let the pool's helper go to sleep), so the mix is then
timed against every layer split, whole runs alternated the same way, and kept only when it
is faster by ``KEEP_MARGIN``. Each layer may be faster split while the whole run is faster
on one thread (the split layers' outputs then cross between the cores: ConvNeXt here,
4.41 ms split, 3.96 alone): when the tuning's first runs, every layer alone, were not
slower than its first runs split, every layer alone is then timed against the winner the
same way. One thread here means ``threads.set_serial``: the layer's
kernels run every chunk on the calling thread, with the same tiling and so the same
results.
"""

from __future__ import annotations

import numpy as np

#: tune (False: every layer uses the backend's threads; tests and benchmarks)
ENABLED = True
#: runs of a new input signature before the tuning starts (plans, packed weights, caches),
#: all split: inputs whose shapes never repeat just run split
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
#: time every layer alone as a whole where the first runs suggest it (False: only the
#: per-layer mix; tests and benchmarks)
TRY_ALL_ALONE = True
#: input signatures whose tuning a worker keeps at once (a model fed a few shapes in turn)
KEYS = 4


class _State:
    """The tuning of one input signature."""

    __slots__ = ("runs", "mode", "alone_seen", "alone", "split", "choice", "final", "mix",
                 "mixed", "plain", "base", "runs_alone", "runs_split", "try_all")

    def __init__(self, steps: int):
        self.runs, self.mode, self.alone_seen = -SKIP, False, False
        self.alone: list[list[float]] = [[] for _ in range(steps)]
        self.split: list[list[float]] = [[] for _ in range(steps)]
        self.choice: list[bool | None] = [None] * steps  # True: one thread
        self.final: list[bool] | None = None
        self.mix: list[bool] | None = None
        self.mixed: list[float] = []
        self.plain: list[float] = []
        #: what a mix is timed against (None: every layer split)
        self.base: list[bool] | None = None
        #: whole-run times of the tuning's first runs (every layer alone, or every one split)
        self.runs_alone: list[float] = []
        self.runs_split: list[float] = []
        #: whether every layer alone is still to be timed against the winner
        self.try_all = False


class ThreadTuner:
    """Per-step thread choice of one run loop's steps (``run_loops.run_on_cpu``)."""

    def __init__(self):
        self._states: dict = {}
        self._current: _State | None = None

    @property
    def final(self) -> list[bool] | None:
        """The last run's signature's choice per step, once tuned (else None)."""
        return None if self._current is None else self._current.final

    @property
    def key(self):
        """The last run's input signature (None before any run)."""
        return next(reversed(self._states), None)

    def modes(self, key, steps: int) -> list[bool] | None:
        """Per step, whether it runs on one thread in this run; None: all split."""
        st = self._states.get(key)
        if st is None or len(st.choice) != steps:
            st = _State(steps)
            if len(self._states) >= KEYS:
                del self._states[next(iter(self._states))]  # the oldest signature
        else:
            del self._states[key]  # (re-inserted last: the dict's order is recency)
        self._states[key] = self._current = st
        if st.final is not None:
            return st.mix  # the kept mix, or None
        if st.runs < 0:  # warming up (plans, packed weights), all split
            st.mode = False
            return None
        st.mode = st.runs % 4 in (1, 2)  # A B B A: split, alone, alone, split
        if st.mix is not None:  # the mix against its base (all split, or a kept mix)
            return st.mix if st.mode else st.base
        mode = st.mode
        return [mode if c is None else c for c in st.choice]

    def record(self, marks: list[float]) -> None:
        """Book this run's per-step times (``marks``: each step's start and end clock)."""
        st = self._current
        if st is None or st.final is not None:
            return
        if st.runs < 0:
            st.runs += 1
            return
        if st.mode and not st.alone_seen:
            # the first run with layers alone loads (or compiles) their one-thread kernels:
            # not timed, and the next run is again one with layers alone
            st.alone_seen = True
            return
        if st.mix is not None:
            (st.mixed if st.mode else st.plain).append(marks[-1] - marks[0])
            st.runs += 1
            if len(st.mixed) + len(st.plain) >= VERIFY:
                keep = np.median(st.mixed) < (1 - KEEP_MARGIN) * np.median(st.plain)
                winner = st.mix if keep else st.base
                if st.try_all and not all(st.mix):
                    # every layer alone against the winner, the same way
                    st.try_all, st.base, st.mix = False, winner, [True] * len(st.mix)
                    st.mixed, st.plain, st.runs = [], [], 0
                    return
                st.final = list(winner) if winner is not None else [False] * len(st.mix)
                st.mix = winner
            return
        if all(c is None for c in st.choice):  # (whole runs: every layer alone, or split)
            (st.runs_alone if st.mode else st.runs_split).append(marks[-1] - marks[0])
        times = st.alone if st.mode else st.split
        for k, c in enumerate(st.choice):
            if c is None:
                times[k].append(marks[2 * k + 1] - marks[2 * k])
        st.runs += 1
        if st.runs % 2 == 0:
            self._settle(st, last=st.runs >= RUNS)

    @staticmethod
    def _settle(st: _State, last: bool) -> None:
        for k, c in enumerate(st.choice):
            if c is not None or len(st.alone[k]) < 2 or len(st.split[k]) < 2:
                continue
            alone, split = float(np.median(st.alone[k])), float(np.median(st.split[k]))
            if alone > CLEAR * split or max(alone, split) < TINY_S:
                st.choice[k] = False
            elif last:
                st.choice[k] = alone < (1 - MARGIN) * split
        if last or all(c is not None for c in st.choice):
            mix = [bool(c) for c in st.choice]
            st.alone = st.split = []  # (the samples are not needed any more)
            # the first runs (every layer alone, or every layer split) no slower alone:
            # all alone may win as a whole even where each layer alone did not
            st.try_all = TRY_ALL_ALONE and bool(st.runs_alone) and bool(st.runs_split) \
                and not all(mix) and np.mean(st.runs_alone) <= np.mean(st.runs_split)
            if any(mix):  # layers alone change what the others find in their caches
                st.mix, st.runs = mix, 0
            elif st.try_all:
                st.try_all, st.mix, st.runs = False, [True] * len(mix), 0
            else:
                st.final, st.mix = mix, None

    @property
    def mix(self) -> list[bool] | None:
        """The mix being checked (or kept) for the last run's signature."""
        return None if self._current is None else self._current.mix

    def summary(self) -> dict:
        """What the tuning found for the last run's signature: ``{"tuned": bool, "alone":
        steps on one thread}``."""
        final = self.final
        if final is None:
            return {"tuned": False, "alone": 0}
        return {"tuned": True, "alone": sum(final)}

"""The CPU backend's helper threads: a job runs on them and on the calling thread at once.

A helper that has just finished a job polls for the next one for ``spin_us`` (bounded,
without the GIL, see ``spin.py``) and then blocks (in a futex wait, still without the GIL,
or, where there is none, on a condition variable), so an idle pool costs nothing; within a
model run, where split layers follow each other closely, a helper starts a new job in a few
microseconds instead of the 15-60 us a wake-up from the kernel takes on a virtual machine.
The caller likewise polls for the helpers' results (bounded, then short sleeps) instead of
blocking on an event whose wake-up would come just as late.

Jobs are plain Python calls, or calls of gated Numba kernels (``run(job, tasks=...)``),
which claim their tasks from a shared counter: a helper takes the GIL for those only while
the caller is inside the kernel without it, so neither thread waits in the interpreter's
queue (an empty split 16.6 -> 7.5 us, the helper starting 3-4 us after the caller instead
of 15-17).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from engine.backends.cpu import spin

#: how long a helper polls for its next job before it blocks: long enough to bridge the
#: single-threaded stretches inside a model run (model A/B against 200 us: gpt 0.94x,
#: squeezenet 0.935x, crnn 0.93x, bert and vit 0.96-0.97x; 3 ms was no better); after a
#: run the helper spends at most this long polling, then sleeps
SPIN_US = 1000.0
#: how long a helper that saw a job waits before it asks for the GIL (see spin.finish_and_wait)
SETTLE_US = 15.0
#: how long the caller polls for the helpers' results before it polls with short sleeps
CALLER_SPIN_US = 2000.0


class WorkerPool:
    """``helpers`` threads that run ``job()`` beside the caller (see the module docstring)."""

    def __init__(self, helpers: int, spin_us: float = SPIN_US, settle_us: float = SETTLE_US):
        rate = spin.polls_per_us()
        self._polls = int(spin_us * rate)
        self._settle = int(settle_us * rate)
        self._caller_polls = int(CALLER_SPIN_US * rate)
        self._word = np.zeros(1, np.int64)  # the job's number, raised once per job
        self._done = np.zeros(helpers, np.int64)  # the number of each helper's last job done
        self._cond = threading.Condition(threading.Lock())
        self._sleeping = 0
        self._sleepers = np.zeros(1, np.int64)  # helpers in a futex wait (``spin.FUTEX``)
        self._closed = False
        self._job = None
        self._gate = spin.new_gate()  # the current job's (``spin``)
        self._caller = threading.Lock()  # one caller at a time; others run their job alone
        self._threads = [threading.Thread(target=self._serve, args=(slot,), daemon=True,
                                          name=f"cpu-helper-{slot}") for slot in range(helpers)]
        for thread in self._threads:
            thread.start()

    @property
    def helpers(self) -> int:
        return len(self._threads)

    def _serve(self, slot: int) -> None:
        seen, back = 0, False
        gate, timeout = self._gate, spin.new_timeout()
        while True:
            job = spin.finish_and_wait(self._done, slot, seen, self._word, self._polls,
                                       self._settle, gate, back, self._sleepers, timeout)
            back = False
            if job < 0:
                seen = -1 - job
                with self._cond:
                    self._sleeping += 1
                    while int(self._word[0]) == seen and not self._closed:
                        self._cond.wait()
                    self._sleeping -= 1
                job = int(self._word[0])
                if gate[spin.GATE_STATE] != spin.GATE_PLAIN and not spin.take(gate, job):
                    seen = job
                    continue
            if self._closed:
                return
            seen = job
            call = self._job  # posted before the word, and kept while a helper is out on it
            try:
                if gate[spin.GATE_STATE] == spin.GATE_PLAIN:
                    call()
                else:
                    back = True
                    call(gate, job, 0)
            except BaseException:  # noqa: S110 - a job reports its own errors to its caller
                pass
            # the job's closure holds its layer's arrays (phase planes, outputs): not kept
            # alive while this helper waits for the next job
            call = None

    def run(self, job, tasks: int | None = None) -> bool:
        """Call ``job()`` on every helper and on the calling thread; return once all calls
        have returned. Returns False, having run nothing, while another thread (or a job of
        this pool) is using the pool: the caller then does the work alone.

        With ``tasks``, the job calls a gated kernel: ``job(gate, generation, polls)``
        enters a Numba kernel that opens ``gate`` first (``spin.open_gate``), claims tasks
        of job ``generation`` from it (``spin.claim``) until none are left, and, on the
        calling thread (``polls`` > 0), waits there until the helpers that took the job are
        back (``spin.helpers_back``). A helper takes the GIL only once the caller is inside
        the kernel (and not at all when nothing is left to claim), and gives it back while
        the caller is still inside: neither waits in the interpreter's queue."""
        if self._closed or not self._caller.acquire(blocking=False):
            return False
        try:
            gate = self._gate
            number = int(self._word[0]) + 1
            if tasks is None:
                gate[spin.GATE_STATE] = spin.GATE_PLAIN
            else:
                spin.arm_gate(gate, number, tasks)
            self._job = job
            self._post()
            if tasks is not None:
                try:
                    job(gate, number, self._caller_polls)
                finally:
                    while not spin.helpers_back(gate, 1):
                        time.sleep(50e-6)
                    self._job = None  # (every helper that took it is back)
                return True
            job()
            helpers = len(self._threads)
            if not spin.wait_all(self._done, helpers, number, self._caller_polls):
                while not spin.wait_all(self._done, helpers, number, 1):
                    time.sleep(50e-6)
            self._job = None
        finally:
            self._caller.release()
        return True

    def _post(self) -> None:
        """Raise the job number and wake sleeping helpers."""
        if spin.FUTEX:
            spin.post(self._word, self._sleepers)
            return
        with self._cond:
            self._word[0] += 1
            if self._sleeping:
                self._cond.notify_all()

    def close(self) -> None:
        """Let the helpers exit (they are daemon threads; nobody waits for them)."""
        self._closed = True
        self._gate[spin.GATE_STATE] = spin.GATE_PLAIN
        self._post()

"""Keep the UI thread ahead of compute threads in the OS scheduler (Linux).

The engine thread, Numba's worker threads and a software GPU's (lavapipe's) threads can
keep every core busy; at equal priority the UI thread then waits for a time slice and the
window stutters. Raising the other threads' nice value (always allowed for one's own
threads) leaves them all the CPU the UI does not use.
"""

from __future__ import annotations

import os
import threading

TASKS = "/proc/self/task"


def native_id() -> int:
    return threading.get_native_id()


def deprioritize_other_threads(keep: set[int], nice: int = 5,
                               changed: dict[int, int] | None = None) -> int:
    """Set ``nice`` on every thread of this process not in ``keep``; returns how many changed.

    ``changed`` collects {thread id: previous nice} for ``restore``.
    """
    if not hasattr(os, "setpriority") or not os.path.isdir(TASKS):
        return 0
    count = 0
    try:
        tids = [int(t) for t in os.listdir(TASKS)]
    except OSError:
        return 0
    for tid in tids:
        if tid in keep:
            continue
        try:
            before = os.getpriority(os.PRIO_PROCESS, tid)
            if before < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                count += 1
                if changed is not None:
                    changed.setdefault(tid, before)
        except OSError:  # the thread ended meanwhile, or the system does not allow it
            continue
    return count


def restore(changed: dict[int, int]) -> None:
    """Give threads back their previous nice value where the system allows it (the window
    closes; the process may go on, as under a test runner)."""
    for tid, before in changed.items():
        try:
            os.setpriority(os.PRIO_PROCESS, tid, before)
        except OSError:  # ended, or lowering nice needs a privilege this process lacks
            continue
    changed.clear()

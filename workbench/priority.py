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


def deprioritize_other_threads(keep: set[int], nice: int = 5) -> int:
    """Set ``nice`` on every thread of this process not in ``keep``; returns how many changed."""
    if not hasattr(os, "setpriority") or not os.path.isdir(TASKS):
        return 0
    changed = 0
    try:
        tids = [int(t) for t in os.listdir(TASKS)]
    except OSError:
        return 0
    for tid in tids:
        if tid in keep:
            continue
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                changed += 1
        except OSError:  # the thread ended meanwhile, or the system does not allow it
            continue
    return changed

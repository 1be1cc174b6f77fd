"""Whether a second process may take half of a large trace's work (ingest/halves.py, emit/halves.py).

Contract: ``second_cpu_free()`` is true on Linux (``os.fork`` there copies the process as it is; macOS's system
frameworks are not safe to use in a forked child, which is why Python's multiprocessing spawns there), where this
process may run on two CPUs or more and it is alone: no other thread (a fork copies a thread's locks mid-flight, not
the thread) and not a multiprocessing worker (its pool already spreads the work over the CPUs). The work split this way
is at least SPLIT_BYTES of JSON.
"""
from __future__ import annotations

import os
import sys
import threading
from multiprocessing import parent_process

# Below this a second process does not pay: forking a ~0.5 GB process and handing its half back take ~0.1 s, about
# what reading 2 MB of events takes (issue 34's 272 MB trace: ~10 s of ingest, ~3 s of writing; docs/performance.md)
SPLIT_BYTES = 1 << 25


def second_cpu_free() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and cpus() >= 2 and alone()


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call (macOS)
        return os.cpu_count() or 1


def alone() -> bool:
    """No other thread in this process, and not a multiprocessing worker."""
    return threading.active_count() == 1 and parent_process() is None

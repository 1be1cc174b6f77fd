"""Whether a second process may take half of a large trace's work (ingest/halves.py, emit/halves.py).

Contract: ``second_cpu_free()`` is true on Linux (``os.fork`` there copies the process as it is; macOS's system
frameworks are not safe to use in a forked child, which is why Python's multiprocessing spawns there), where this
process may run on two CPUs or more and it is alone: no other thread (a fork copies a thread's locks mid-flight, not
the thread) and not a multiprocessing worker (its pool already spreads the work over the CPUs). The work split this way
is at least SPLIT_BYTES of JSON. ``Meeting`` shares the work items out between the two as they go, ``Child`` is the
forked child's handle.
"""
from __future__ import annotations

import mmap
import os
import signal
import struct
import sys
import threading
from multiprocessing import get_context, parent_process
from typing import Callable

# Below this a second process does not pay: forking a ~0.5 GB process and handing its half back take ~0.1 s, about
# what reading 2 MB of events takes (issue 34's 272 MB trace: ~10 s of ingest, ~3 s of writing; docs/performance.md)
SPLIT_BYTES = 1 << 25
# How long a process waits for the shared lock before it checks that the other one is still running
LOCK_POLL_S = 0.5


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


class Meeting:
    """Work items 0 .. n - 1 shared out between two processes: the parent takes them from the front, the child from
    the back, one at a time under a lock (shared across the fork), until they meet. Neither waits for the other at
    the end, whichever runs slower: with fixed halves the two took 4.1-5.8 s on issue 34's trace, the slower one by
    run, not by process (docs/performance.md)."""

    def __init__(self, n: int) -> None:
        self._lock = get_context("fork").Lock()
        self._ends = mmap.mmap(-1, 16)  # anonymous and MAP_SHARED: both processes see the two ends
        struct.pack_into("qq", self._ends, 0, 0, n)

    def take(self, front: bool, peer_alive: Callable[[], bool]) -> int | None:
        """The next item from the front (or the back), or None when none is left or the peer died (perhaps holding
        the lock: the parent then does every item after its own last)."""
        while not self._lock.acquire(timeout=LOCK_POLL_S):
            if not peer_alive():
                return None
        try:
            lo, hi = struct.unpack_from("qq", self._ends, 0)
            if lo >= hi:
                return None
            struct.pack_into("qq", self._ends, 0, lo + 1 if front else lo, hi if front else hi - 1)
            return lo if front else hi - 1
        finally:
            self._lock.release()


class Child:
    """The forked child's process id, whether it is still running, and its reaping (``status``: its exit code, -N
    when signal N killed it, None while unreaped)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.status: int | None = None

    def alive(self) -> bool:
        if self.status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status is None

    def reap(self, kill: bool = False) -> None:
        if self.status is None:
            if kill:
                os.kill(self.pid, signal.SIGKILL)
            self.status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])

"""Local worker processes that stop at once on Ctrl-C or SIGTERM: ``scale DIR --jobs N`` (commands/batch.py) and the
ranks of a distributed run (pipeline/fanout.py, LocalPool) both run on it.

Contract: ``StoppablePool(n).submit(fn, *args)`` runs ``fn(*args)`` in one of ``n`` processes. ``stop()`` (the
caller's, on its interrupt) sets the shared stop flag and sends SIGINT to every worker: a worker running a task
unwinds out of it once (KeyboardInterrupt: a write in progress removes its temporary file, emit/writer.py), an idle
one ignores it, and no task starts after the flag is set (it raises KeyboardInterrupt at once), so ``shutdown``
returns as soon as the running tasks have unwound. A terminal's Ctrl-C reaches the workers too (one process group);
``kill -INT`` of the main process alone reaches them through ``stop``. Before this, a fan-out on 2 processes went on
~4 s after Ctrl-C on 4 small ranks: ProcessPoolExecutor had already queued the next rank of each worker, which
started after the signal and ran to its end (for a rank of a GB trace, minutes).
"""
from __future__ import annotations

import os
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable


class StopFlag:
    """The pool's shared stop flag: one byte of shared memory, set and read without a lock. A worker's signal
    handler sets it, and Python runs a handler between two bytecodes of whatever the thread was doing (the ``signal``
    module docs, "Execution of Python signal handlers"), so the handler must not take a lock that code may hold.
    ``multiprocessing.Event`` did: ``is_set`` holds its lock, and a Ctrl-C landing there hung the worker in ``set``
    for good, and ``scale DIR --jobs N`` with it (seen once in CI; tests/test_batch.py reproduces it in a second)."""

    def __init__(self) -> None:
        import ctypes
        import multiprocessing

        self._flag = multiprocessing.RawValue(ctypes.c_bool, False)

    def set(self) -> None:
        self._flag.value = True

    def is_set(self) -> bool:
        return bool(self._flag.value)


# A worker process's signal state: the shared stop flag, and whether a task is running (only then does a signal
# unwind it, once; an idle worker ignores it and starts no new task).
_WORKER: dict[str, Any] = {"stop": None, "busy": False, "hit": False}


def worker_init(stop: StopFlag, pids: Any) -> None:
    _WORKER["stop"] = stop
    pids.put(os.getpid())
    signal.signal(signal.SIGINT, _worker_signal)
    signal.signal(signal.SIGTERM, _worker_signal)


def _worker_signal(signum: int, frame: object) -> None:
    _WORKER["stop"].set()
    if _WORKER["busy"] and not _WORKER["hit"]:
        _WORKER["hit"] = True
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)


def stopping() -> bool:
    """In a worker: whether the pool is stopping (a task checks it before each output it writes)."""
    return _WORKER["stop"] is not None and _WORKER["stop"].is_set()


def _task(fn: Callable[..., Any], args: tuple) -> Any:
    """``fn(*args)``, unwound once by a signal while it runs; a signal that lands after it has returned (before
    ``busy`` is cleared) does not drop its result: scale_unit's rows of traces already written (the report would
    count fewer than are on disk). The result is kept from the moment ``append`` holds it; the window left is the
    step from ``fn``'s return to that call."""
    if _WORKER["stop"].is_set():
        raise KeyboardInterrupt
    _WORKER["busy"], _WORKER["hit"] = True, False
    box: list[Any] = []
    try:
        try:
            box.append(fn(*args))
        finally:
            _WORKER["busy"] = False
    except (KeyboardInterrupt, SystemExit):
        if box:  # the one unwinding a signal gives a task came after it had returned
            return box[0]
        raise
    return box[0]


class StoppablePool:
    """``n`` worker processes (module doc); ``fn`` and its arguments must pickle."""

    def __init__(self, n: int) -> None:
        import multiprocessing

        self._flag = StopFlag()
        self._pids: Any = multiprocessing.SimpleQueue()
        self._known: list[int] = []
        self._executor = ProcessPoolExecutor(max_workers=n, initializer=worker_init, initargs=(self._flag, self._pids))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self._executor.submit(_task, fn, args)

    def stop(self) -> None:
        """Set the stop flag and signal every worker (one running a task unwinds out of it)."""
        self._flag.set()
        while not self._pids.empty():
            self._known.append(self._pids.get())
        for pid in self._known:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def shutdown(self) -> None:
        """Cancel what has not started and wait for the workers (after ``stop``: for the running tasks to unwind)."""
        self._executor.shutdown(cancel_futures=True)

    def __enter__(self) -> "StoppablePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

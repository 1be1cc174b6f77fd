"""Where a signal's exception may land: Python runs a signal handler in the main thread, between two bytecodes of
whatever that thread was doing (the ``signal`` module docs, "Execution of Python signal handlers"), so Ctrl-C's
KeyboardInterrupt (and the SystemExit of the CLI's or a pool worker's SIGTERM handler) can surface at any point
of the code it interrupts. Two tools for the few places where "any point" is wrong:

- ``held()``: the block's state changes land whole: a SIGINT or SIGTERM that arrives meanwhile is held, and its
  handler runs right after the block. (emit/writer.WriteBehind starts its thread in one: an interrupt between the
  thread's creation and its start had left ``abort`` waiting for a thread that never ran: ``scale`` hung on Ctrl-C.)
- ``ignoring_sigint()``: a second Ctrl-C is ignored while the workers stop (pipeline/pool.py).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

HELD = (signal.SIGINT, signal.SIGTERM)


class held:
    """``with held(): ...`` (module doc). Only the main thread's handlers are swapped (no other thread is
    interrupted by one), and only Python handlers (SIG_DFL and SIG_IGN raise nothing). A signal that lands while the
    handlers are swapped in or out goes to the original handler or is held; none is lost, none runs twice."""

    def __init__(self) -> None:
        self._previous: dict[int, Callable[..., Any]] = {}
        self._pending: list[int] = []
        self._open = False

    def _hold(self, signum: int, frame: Any) -> None:
        if self._open:
            self._pending.append(signum)
        else:  # the block is over, its handler not yet restored
            self._previous[signum](signum, frame)

    def __enter__(self) -> "held":
        if threading.current_thread() is not threading.main_thread():
            return self
        self._open = True
        try:
            for s in HELD:
                h = signal.getsignal(s)
                if callable(h):
                    self._previous[s] = h
                    signal.signal(s, self._hold)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._open = False
        for s, h in self._previous.items():
            signal.signal(s, h)
        for s in self._pending:
            signal.raise_signal(s)


@contextmanager
def ignoring_sigint() -> Iterator[None]:
    """A second Ctrl-C is ignored meanwhile (while the workers stop and their results are collected)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)

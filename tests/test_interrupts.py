"""habitat_trace/interrupts.py: a signal that lands in a ``held()`` block runs its handler right after the block,
each held signal once; the handlers are back as they were."""
from __future__ import annotations

import signal
import threading
from typing import Any

import pytest

from habitat_trace.interrupts import held, ignoring_sigint


@pytest.fixture
def ctrl_c_raises() -> Any:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_signal_in_the_block_is_raised_after_it(ctrl_c_raises: None) -> None:
    done = []
    with pytest.raises(KeyboardInterrupt):
        with held():
            signal.raise_signal(signal.SIGINT)
            done.append("rest of the block")
    assert done == ["rest of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_each_signal_held_in_the_block_is_delivered_after_it_and_a_quiet_block_delivers_none(ctrl_c_raises: None) -> None:
    calls = []

    def count(signum: int, frame: Any) -> None:
        calls.append(signum)

    signal.signal(signal.SIGTERM, count)
    try:
        with held():
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGTERM)
        assert calls == [signal.SIGTERM, signal.SIGTERM]  # each delivered, after the block
        with held():
            pass
        assert len(calls) == 2 and signal.getsignal(signal.SIGTERM) is count
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_off_the_main_thread_it_changes_nothing() -> None:
    seen: list[Any] = []

    def body() -> None:
        with held():
            seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [before]


def test_ignoring_sigint_restores_the_handler(ctrl_c_raises: None) -> None:
    with ignoring_sigint():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

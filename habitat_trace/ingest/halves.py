"""A large trace's tables built by two processes: the second half of its events in a forked child, at once.

Contract: ``assemble_events(events)`` gives what ``assemble(event_reads(events, EventFields.read))`` gives (the same
tables, violations and ``Events.canonical``), from two processes where that can help: a plain file's events of at
least forking.SPLIT_BYTES, read for the first time, where a second CPU is free (forking.second_cpu_free). The
child (``os.fork``: it shares the document's bytes, copy-on-write) parses and assembles the events from the chunk
boundary nearest the middle, and sends its ``Assembly`` through a pipe; the parent does the first half meanwhile,
then appends the child's (assemble.Assembly.extend). Anything else is read in this process alone. If the child fails,
the parent reads the second half itself, so a bad event is reported as a one-process read reports it.
"""
from __future__ import annotations

import os
import pickle
import signal
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from habitat_trace import forking
from habitat_trace.ingest.assemble import Assembly, Parts, assemble
from habitat_trace.ingest.events import ChunkError, Events, event_reads
from habitat_trace.ingest.fields import EventFields

# The child's share of the events' bytes: the parent also unpickles the child's tables (0.13 s of issue 34's trace)
# while the child pickles them, so an even split by bytes leaves neither waiting long
CHILD_SHARE = 0.5
T = TypeVar("T")


def assemble_events(events: Sequence[Any], then: Callable[[], None] = lambda: None) -> Parts:
    """The tables of ``events`` (ingest.assemble), in two processes where ``splittable``; ``then`` is called once
    every event is read, before the tables are joined (ingest drops the document's bytes there)."""
    if isinstance(events, Events) and splittable(events):
        return _two_halves(events, _middle(events), then)
    return assemble(_then(event_reads(events, EventFields.read), then))


def _then(chunks: Iterable[T], then: Callable[[], None]) -> Iterator[T]:
    yield from chunks
    then()


def splittable(events: Sequence[Any]) -> bool:
    """Whether a second process may read half of ``events``: a large document read for the first time, where a
    second CPU is free (forking.second_cpu_free)."""
    return (isinstance(events, Events) and not events.shares_dicts and events.canonical is None
            and events.nbytes >= forking.SPLIT_BYTES and forking.second_cpu_free())


def _middle(events: Events) -> int:
    """The chunk boundary that leaves the child about CHILD_SHARE of the events' bytes."""
    bounds = events.bounds()
    return min(bounds[1:-1] or bounds[-1:], key=lambda k: abs(events.offset(k) - (1 - CHILD_SHARE) * events.nbytes))


def _two_halves(events: Events, mid: int, then: Callable[[], None]) -> Parts:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read)
        _child(events, mid, write)
    os.close(write)
    reaped = False
    try:
        first, canonical = _read(events, 0, mid)
        with os.fdopen(read, "rb") as pipe:
            read = -1
            try:
                answer = pickle.load(pipe)
            except (EOFError, pickle.UnpicklingError):  # the child died (killed, out of memory)
                answer = ("failed", None)
        os.waitpid(pid, 0)
        reaped = True
        if answer[0] == "chunk":
            raise ChunkError(answer[1])
        later, more = answer[1] if answer[0] == "ok" else _read(events, mid, len(events))
        first.extend(later)
        events.canonical = canonical + more
        then()
        return first.parts()
    finally:
        if read >= 0:
            os.close(read)
        if not reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _read(events: Events, lo: int, hi: int) -> tuple[Assembly, list[tuple[int, int]]]:
    """Events ``lo`` to ``hi - 1`` assembled, and their canonical parts (Events.read_span)."""
    out = Assembly()
    canonical: list[tuple[int, int]] = []
    for first, chunk, fields in events.read_span(EventFields.read, lo, hi, canonical):
        out.feed(first, chunk, fields)
        del chunk, fields
    return out, canonical


def _child(events: Events, mid: int, write: int) -> None:
    """Assemble events ``mid`` onward and send ``("ok", (Assembly, canonical))``, ``("chunk", message)`` for a
    ChunkError, or ``("failed", None)``; then leave at once (no atexit handlers, no flush of the parent's buffers)."""
    try:
        try:
            answer: tuple[str, Any] = ("ok", _read(events, mid, len(events)))
        except ChunkError as exc:
            answer = ("chunk", str(exc))
        except BaseException:  # noqa: BLE001 - the parent reads this half again and reports what it finds
            answer = ("failed", None)
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        del answer
        with os.fdopen(write, "wb") as pipe:
            pipe.write(data)
    finally:
        os._exit(0)

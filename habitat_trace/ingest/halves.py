"""A large trace's tables built by two processes: a forked child assembles chunks of its events at the same time.

Contract: ``assemble_events(events)`` gives what ``assemble(event_reads(events, EventFields.read))`` gives (the same
tables, violations and ``Events.canonical``), from two processes where that can help: a plain file's events of at
least forking.SPLIT_BYTES, read for the first time, where a second CPU is free (forking.second_cpu_free). The child
(``os.fork``: it shares the document's bytes, copy-on-write) takes the events' chunks from the back and the parent from
the front, one at a time, until they meet (``forking.Meeting``); the child joins its chunks in order and sends the
``Assembly`` through a pipe, which the parent appends to its own (assemble.Assembly.extend). Anything else is read in
this process alone. If the child fails, the parent reads every chunk after its own last, so a bad event is reported
as a one-process read reports it.
"""
from __future__ import annotations

import os
import pickle
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from habitat_trace import forking
from habitat_trace.ingest.assemble import Assembly, Parts, assemble
from habitat_trace.ingest.events import ChunkError, Events, event_reads
from habitat_trace.ingest.fields import EventFields

T = TypeVar("T")


def assemble_events(events: Sequence[Any], then: Callable[[], None] = lambda: None) -> Parts:
    """The tables of ``events`` (ingest.assemble), in two processes where ``splittable``; ``then`` is called once
    every event is read, before the tables are joined (ingest drops the document's bytes there)."""
    if isinstance(events, Events) and splittable(events):
        return _two_halves(events, then)
    return assemble(_then(event_reads(events, EventFields.read), then))


def _then(chunks: Iterable[T], then: Callable[[], None]) -> Iterator[T]:
    yield from chunks
    then()


def splittable(events: Sequence[Any]) -> bool:
    """Whether a second process may read half of ``events``: a large document read for the first time, where a
    second CPU is free (forking.second_cpu_free)."""
    return (isinstance(events, Events) and not events.shares_dicts and events.canonical is None
            and events.nbytes >= forking.SPLIT_BYTES and forking.second_cpu_free())


def _two_halves(events: Events, then: Callable[[], None]) -> Parts:
    bounds = events.bounds()
    meeting = forking.Meeting(len(bounds) - 1)
    read, write = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read)
        _child(events, bounds, meeting, write, lambda: os.getppid() == parent)
    os.close(write)
    child = forking.Child(pid)
    try:
        first, canonical, taken = Assembly(), list[tuple[int, int]](), 0
        while (k := meeting.take(True, child.alive)) is not None:
            _feed(first, canonical, events, bounds[k], bounds[k + 1])
            taken = k + 1
        with os.fdopen(read, "rb") as pipe:
            read = -1
            try:
                answer = pickle.load(pipe)
            except (EOFError, pickle.UnpicklingError):  # the child died (killed, out of memory)
                answer = ("failed", None)
        child.reap()
        if answer[0] == "chunk":
            raise ChunkError(answer[1])
        if answer[0] == "ok":
            later, more = answer[1]
        else:  # every chunk after the parent's last is read here, whatever the child had taken
            later, more = Assembly(), []
            _feed(later, more, events, bounds[taken], len(events))
        first.extend(later)
        events.canonical = canonical + more
        then()
        return first.parts()
    finally:
        if read >= 0:
            os.close(read)
        child.reap(kill=True)


def _feed(out: Assembly, canonical: list[tuple[int, int]], events: Events, lo: int, hi: int) -> None:
    """Assemble events ``lo`` to ``hi - 1`` into ``out``, their canonical parts appended (Events.read_span)."""
    out.feed_all(events.read_span(EventFields.read, lo, hi, canonical))


def _child(events: Events, bounds: list[int], meeting: forking.Meeting, write: int,
           parent_alive: Callable[[], bool]) -> None:
    """Assemble chunks taken from the back, each on its own, then join them in order (Assembly.extend) and send
    ``("ok", (Assembly, canonical))``, ``("chunk", message)`` for a ChunkError, or ``("failed", None)``; then leave
    at once (no atexit handlers, no flush of the parent's buffers)."""
    try:
        try:
            taken: list[tuple[int, Assembly, list[tuple[int, int]]]] = []
            while (k := meeting.take(False, parent_alive)) is not None:
                one, canonical = Assembly(), list[tuple[int, int]]()
                _feed(one, canonical, events, bounds[k], bounds[k + 1])
                taken.append((k, one, canonical))
            joined, canonical = Assembly(), []
            for _, one, more in sorted(taken, key=lambda t: t[0]):
                joined.extend(one)
                canonical += more
            answer: tuple[str, Any] = ("ok", (joined, canonical))
        except ChunkError as exc:
            answer = ("chunk", str(exc))
        except BaseException:  # noqa: BLE001 - the parent reads these chunks again and reports what it finds
            answer = ("failed", None)
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        del answer
        with os.fdopen(write, "wb") as pipe:
            pipe.write(data)
    finally:
        os._exit(0)

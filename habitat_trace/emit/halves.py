"""A large trace's written events made by two processes: a forked child makes some of their JSON at the same time.

Contract: ``joined(units, make, sizes)`` yields, in pieces, ``b",".join(p for p in map(make, units) if p)``: the
events' JSON of each unit (emit.writer: a chunk of events, spliced or dumped), commas between. Where the units hold
at least forking.SPLIT_BYTES of input and a second CPU is free (forking.second_cpu_free), a child (``os.fork``: it
shares the replayed tables, copy-on-write) makes units taken from the back into a temporary file while this process
makes and yields those from the front, until they meet (forking.Meeting); the child's follow, read back by the
file's index. The pieces' cut differs, their bytes do not, and a .gz output is deflated from them in GZIP_BLOCK
blocks however they are cut (writer.gzip_stream). If the child fails, this process makes every unit after its own
last, so an error is the one-process write's.
"""
from __future__ import annotations

import os
import struct
import tempfile
from typing import IO, Callable, Generator, Iterable, Sequence, TypeVar

from habitat_trace import forking

U = TypeVar("U")
Piece = bytes | memoryview
Pieces = Generator[Piece, None, None]


def joined(units: Sequence[U], make: Callable[[U], Piece], sizes: Sequence[int]) -> Pieces:
    """The non-empty ``make(unit)`` of ``units`` in order, commas between; ``sizes``: each unit's input bytes."""
    if len(units) >= 2 and sum(sizes) >= forking.SPLIT_BYTES and forking.second_cpu_free():
        return commas(_in_two(units, make))
    return commas(map(make, units))


def commas(parts: Iterable[Piece]) -> Pieces:
    """The non-empty ``parts``, a comma between two (the JSON array's separators)."""
    sep = b""
    for part in parts:
        if part:
            yield sep
            yield part
            sep = b","


def _in_two(units: Sequence[U], make: Callable[[U], Piece]) -> Pieces:
    """``make(unit)`` of every unit in order: the parent's from the front as it makes them, then the child's from the
    spool (or, where the child failed, made here)."""
    meeting = forking.Meeting(len(units))
    with tempfile.TemporaryFile() as spool:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _child(units, make, spool, meeting, lambda: os.getppid() == parent)
        child = forking.Child(pid)
        try:
            taken = 0
            while (k := meeting.take(True, child.alive)) is not None:
                part = make(units[k])
                taken = k + 1
                yield part
            child.reap()
            if child.status != 0:  # failed or killed: every unit after ours made here, its error raised here
                yield from map(make, units[taken:])
                return
            for offset, size in _index(spool):
                spool.seek(offset)
                yield spool.read(size)
        finally:  # an error here or in the consumer, an interrupt: the child's work is not wanted
            child.reap(kill=True)


def _index(spool: IO[bytes]) -> list[tuple[int, int]]:
    """(offset, size) in ``spool`` of each unit the child made, in the units' order: its trailer (_child)."""
    spool.seek(-8, os.SEEK_END)
    (count,) = struct.unpack("<q", spool.read(8))
    spool.seek(-8 - 24 * count, os.SEEK_END)
    rows = sorted(struct.iter_unpack("<qqq", spool.read(24 * count)))
    return [(offset, size) for _, offset, size in rows]


def _child(units: Sequence[U], make: Callable[[U], Piece], spool: IO[bytes], meeting: forking.Meeting,
           parent_alive: Callable[[], bool]) -> None:
    """Make the units taken from the back into ``spool`` as they come, then a trailer: (unit, offset, size) of each
    and their count; leave with 0 when it is all there, 1 on any error (the parent makes them again and reports it),
    at once (no atexit handlers, no flush of the parent's buffers)."""
    code = 1
    try:
        rows: list[tuple[int, int, int]] = []
        while (k := meeting.take(False, parent_alive)) is not None:
            part = make(units[k])
            rows.append((k, spool.tell(), len(part)))
            spool.write(part)
        spool.write(b"".join(struct.pack("<qqq", *row) for row in rows) + struct.pack("<q", len(rows)))
        spool.flush()
        code = 0
    except BaseException:  # noqa: BLE001, S110 - the parent makes these units again and reports what it finds
        pass
    finally:
        os._exit(code)

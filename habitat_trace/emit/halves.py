"""A large trace's written events made by two processes: the later half's JSON by a forked child, at once.

Contract: ``joined(units, make, sizes)`` yields, in pieces, ``b",".join(p for p in map(make, units) if p)``: the
events' JSON of each unit (emit.writer: a chunk of events, spliced or dumped), commas between. Where the units hold
at least forking.SPLIT_BYTES of input and a second CPU is free (forking.second_cpu_free), a child (``os.fork``: it
shares the replayed tables, copy-on-write) makes the units after the middle into a temporary file while this process
makes the first ones; the file's bytes follow them. The pieces' cut differs, their bytes do not, and a .gz output
is deflated from them in GZIP_BLOCK blocks however they are cut (writer.gzip_stream). If the child fails, this
process makes its units itself, so an error is the one-process write's.
"""
from __future__ import annotations

import os
import signal
import tempfile
from typing import IO, Callable, Generator, Sequence, TypeVar

from habitat_trace import forking

U = TypeVar("U")
Piece = bytes | memoryview
Pieces = Generator[Piece, None, None]
SPOOL_BLOCK = 1 << 23  # the child's bytes are read back 8 MiB at a time (the output is streamed, never whole)


def joined(units: Sequence[U], make: Callable[[U], Piece], sizes: Sequence[int]) -> Pieces:
    """The non-empty ``make(unit)`` of ``units`` in order, commas between; ``sizes``: each unit's input bytes."""
    if len(units) >= 2 and sum(sizes) >= forking.SPLIT_BYTES and forking.second_cpu_free():
        return _in_two(units, make, _middle(sizes))
    return _commas(units, make, b"")


def _commas(units: Sequence[U], make: Callable[[U], Piece], sep: bytes) -> Pieces:
    """``make(unit)`` of each unit, after ``sep`` and then a comma before each later non-empty one."""
    for unit in units:
        part = make(unit)
        if part:
            yield sep
            yield part
            sep = b","


def _middle(sizes: Sequence[int]) -> int:
    """The unit the child starts at: the first past half the input bytes (never the first unit)."""
    half, seen = sum(sizes) / 2, 0
    for k, size in enumerate(sizes):
        if seen >= half:
            return max(k, 1)
        seen += size
    return len(sizes) - 1


def _in_two(units: Sequence[U], make: Callable[[U], Piece], mid: int) -> Pieces:
    with tempfile.TemporaryFile() as spool:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _child(units[mid:], make, spool)
        reaped = False
        try:
            sep = b""
            for piece in _commas(units[:mid], make, b""):
                sep = b","  # something was written: the child's bytes follow a comma
                yield piece
            _, status = os.waitpid(pid, 0)
            reaped = True
            if os.waitstatus_to_exitcode(status) != 0:  # failed or killed: its units made here, its error raised here
                yield from _commas(units[mid:], make, sep)
                return
            if spool.seek(0, os.SEEK_END):
                spool.seek(0)
                yield sep
                while block := spool.read(SPOOL_BLOCK):
                    yield block
        finally:
            if not reaped:  # an error here or in the consumer, an interrupt: the child's work is not wanted
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _child(units: Sequence[U], make: Callable[[U], Piece], spool: IO[bytes]) -> None:
    """Write the units' joined JSON to ``spool``; leave with 0 when it is all there, 1 on any error (the parent makes
    them again and reports it), at once (no atexit handlers, no flush of the parent's buffers)."""
    code = 1
    try:
        for piece in _commas(units, make, b""):
            spool.write(piece)
        spool.flush()
        code = 0
    except BaseException:  # noqa: BLE001, S110 - the parent makes these units again and reports what it finds
        pass
    finally:
        os._exit(code)

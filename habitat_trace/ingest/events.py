"""``Events``: a trace's ``traceEvents`` kept as the document's bytes and parsed on access.

Contract: a read-only sequence of the events exactly as orjson parses them: ``len``, ``events[i]`` (parses that one
event), slices (lists), iteration and ``chunks()`` (about ``chunk_bytes`` of JSON at a time, parsed in parts of
PART_BYTES; ``read`` also takes a function of each part right after its parse). ``events[i]`` parses anew: a caller
may change what it gets. Chunks (and iteration) give fresh lists but, for a small document (KEEP_PARSED_BYTES), the
same dicts every time: its events are parsed once, on the first full read, and shared by every later read (emit's
writer copies an event before changing it). Holding the bytes (1x the file) instead of the parsed dicts (5x) is what
keeps a large trace's peak memory down; once ingest has built the tables, the bytes of a plain file are dropped and
read again from the file when asked (``release``: the file's size and modification time must not change meanwhile).
``event_chunks`` gives the same ``(first index, events)`` chunks for a plain list. The first full read of a large
document also finds which of its parts are orjson's own dump of their events (``canonical``: compact JSON as orjson
writes it, as a trace written by orjson is), so that a writer can edit those bytes instead of parsing them again.
"""
from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar, overload

import numpy as np
import orjson

from habitat_trace.errors import TraceFormatError

# A document this small keeps its events parsed once read in full (~5x its bytes: 80 MB at most): a trace written
# to many targets (scale --to all: 52 outputs) is parsed once, not once per output.
KEEP_PARSED_BYTES = 1 << 24
COUNT_BLOCK_BYTES = 1 << 24
CHUNK_BYTES = 1 << 23  # 8 MiB of JSON per chunk: ~30k Kineto events, ~40 MB while parsed; 16 MiB: +60 MB peak
# A chunk is parsed in parts of about this many bytes, and ``Events.read``'s ``each`` reads a part right after its
# parse, while its ~5 MB of new objects are still in the CPU's cache: the parse, canonical check, field reads and
# freeing of a third of issue 34's 272 MB trace took 1.1 s in 1 MiB parts against 1.5-2.0 s in 8 MiB chunks
# (process CPU, 2026-11-27; docs/performance.md)
PART_BYTES = 1 << 20
T = TypeVar("T")


class ChangedFile(TraceFormatError):
    """The trace file changed after it was read (its events are read again from it)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: the file changed while habitat-trace was using it; leave it unchanged and run "
                         "again")


class ChunkError(Exception):
    """A run of events that orjson refuses, or that parses to another number of events than the scan
    found; the caller parses the whole document instead (which names the problem)."""


@dataclass(frozen=True)
class FileStamp:
    """What says a file is the one that was read: its size and modification time (os.stat)."""

    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> "FileStamp":
        return cls(st.st_size, st.st_mtime_ns)


class Events(Sequence[Any]):
    def __init__(self, raw: bytes, starts: np.ndarray, ends: np.ndarray, chunk_bytes: int | None = None) -> None:
        self._view: memoryview | None = memoryview(raw)
        self._file: tuple[Path, FileStamp] | None = None  # after release: where the bytes are
        self._starts = np.asarray(starts, dtype=np.int64)
        self._ends = np.asarray(ends, dtype=np.int64)
        self._chunk_bytes = chunk_bytes or CHUNK_BYTES
        self._counts: dict[bytes, int] = {}
        self._kept: list[tuple[int, list[Any]]] | None = None  # the parsed chunks of a small document
        # (lo, hi) of the chunks whose bytes are orjson.dumps of their events, found by the first full chunks() of a
        # large document (None before); emit.splice writes those from their bytes
        self.canonical: list[tuple[int, int]] | None = None
        # what a reader derives once from a kept document's events (emit.writer's template), by its key
        self.derived: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self._starts)

    def __repr__(self) -> str:
        where = f"{len(self._view)} bytes" if self._view is not None else f"in {self._file[0]}"  # type: ignore[index]
        return f"Events({len(self)} events, {where})"

    @property
    def nbytes(self) -> int:
        """The bytes from the first event's start to the last one's end."""
        return int(self._ends[-1] - self._starts[0]) if len(self) else 0

    def offset(self, k: int) -> int:
        """Where event ``k`` starts, in bytes from the first one's start (``len(self)``: ``nbytes``)."""
        return self.nbytes if k >= len(self) else int(self._starts[k] - self._starts[0])

    def release(self, path: Path, stamp: FileStamp) -> None:
        """Drop the bytes: ``path`` holds them (stamped ``stamp`` when they were read), read again when asked."""
        self._file = (Path(path), stamp)
        self._view = None

    def text_count(self, token: bytes) -> int:
        """Occurrences of ``token`` in the whole document's bytes (a byte count, no parse; counted once)."""
        if token not in self._counts:
            if self._view is not None:
                self._counts[token] = self._view.obj.count(token)  # type: ignore[attr-defined]
            else:
                self._counts[token] = self._count_in_file(token)
        return self._counts[token]

    def _count_in_file(self, token: bytes) -> int:
        path, stamp = self._file  # type: ignore[misc]
        n, tail = 0, b""
        with open(path, "rb") as f:
            if FileStamp.of(os.fstat(f.fileno())) != stamp:
                raise ChangedFile(path)
            while block := f.read(COUNT_BLOCK_BYTES):
                data = tail + block  # a token across two blocks: the previous block's last bytes lead this one
                n += data.count(token)
                tail = data[-(len(token) - 1):] if len(token) > 1 else b""  # shorter than a token: counted once
        return n

    def _bytes(self, a: int, b: int) -> bytes | memoryview:
        """Bytes [a, b) of the document: from memory, or read from the file (ChangedFile when it changed)."""
        if self._view is not None:
            return self._view[a:b]
        path, stamp = self._file  # type: ignore[misc]
        with open(path, "rb") as f:
            if FileStamp.of(os.fstat(f.fileno())) != stamp:
                raise ChangedFile(path)
            data = os.pread(f.fileno(), b - a, a)
        if len(data) != b - a:
            raise ChangedFile(path)
        return data

    @overload
    def __getitem__(self, i: int) -> Any: ...

    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            rows = range(*i.indices(len(self)))
            if not rows:
                return []
            lo, hi = min(rows), max(rows) + 1
            parsed = self.parse(lo, hi)
            return parsed if rows.step == 1 else [parsed[r - lo] for r in rows]
        k = operator.index(i)
        k = k + len(self) if k < 0 else k
        if not 0 <= k < len(self):
            raise IndexError(f"event index {i} out of range for {len(self)} events")
        return orjson.loads(self._bytes(int(self._starts[k]), int(self._ends[k])))

    def __iter__(self) -> Iterator[Any]:
        for _, chunk in self.chunks():
            yield from chunk

    def parse(self, lo: int, hi: int) -> list[Any]:
        """Events ``lo`` to ``hi - 1``, parsed in one call."""
        return self._parse(lo, hi)[0]

    def _parse(self, lo: int, hi: int) -> tuple[list[Any], bytes]:
        """``parse``, and the JSON array it parsed."""
        if hi <= lo:
            return [], b"[]"
        text = b"".join((b"[", self._bytes(int(self._starts[lo]), int(self._ends[hi - 1])), b"]"))
        try:
            out = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ChunkError(f"events {lo}..{hi - 1}: {exc}") from None
        if len(out) != hi - lo:
            raise ChunkError(f"events {lo}..{hi - 1}: parsed {len(out)} events")
        return out, text

    def span_bytes(self, lo: int, hi: int) -> tuple[bytes | memoryview, np.ndarray, np.ndarray]:
        """The bytes of events ``lo`` to ``hi - 1`` (from the first one's start to the last one's end), and each
        event's start and end in them."""
        base = int(self._starts[lo])
        return (self._bytes(base, int(self._ends[hi - 1])), self._starts[lo:hi] - base, self._ends[lo:hi] - base)

    def bounds(self, chunk_bytes: int | None = None, lo: int = 0, hi: int | None = None) -> list[int]:
        """Chunk boundaries of events ``lo`` to ``hi - 1`` (event indices, ``lo`` first and ``hi`` last; default:
        all): a new chunk every ``chunk_bytes`` (default: the one given at construction)."""
        hi = len(self) if hi is None else hi
        if hi <= lo:
            return [lo]
        marks = np.arange(self._starts[lo], self._ends[hi - 1], chunk_bytes or self._chunk_bytes)[1:]
        cuts = np.searchsorted(self._starts[lo:hi], marks) + lo
        return np.unique(np.concatenate(([lo], cuts, [hi]))).tolist()

    @property
    def shares_dicts(self) -> bool:
        """Whether the dicts chunks() gives are shared with later reads (a small document's: kept parsed)."""
        return bool(len(self)) and int(self._ends[-1] - self._starts[0]) <= KEEP_PARSED_BYTES

    def chunks(self, chunk_bytes: int | None = None) -> Iterator[tuple[int, list[Any]]]:
        """``(index of the first event, events)`` for consecutive chunks of about ``chunk_bytes`` (a kept document:
        its chunks); a fresh list each time."""
        for lo, chunk, _ in self.read(None, chunk_bytes):
            yield lo, chunk

    def read(self, each: Callable[[list[Any]], T] | None, chunk_bytes: int | None = None) -> Iterator[
            tuple[int, list[Any], list[T]]]:
        """``chunks()``, each chunk parsed in parts of about PART_BYTES, with ``each`` of every part (in order; none
        without ``each``, or for a kept document after its first read), taken right after the part's parse."""
        if self._kept is not None:
            for lo, events in self._kept:
                yield lo, list(events), []
            return
        keep = self.shares_dicts
        # the first full read of a large document (ingest's) compares each part with orjson's dump of its events:
        # 0.7 s on issue 34's 272 MB trace, against the writer's second parse and dump that a match spares
        canonical: list[tuple[int, int]] | None = [] if not keep and self.canonical is None else None
        kept = []
        for lo, chunk, made in self.read_span(each, 0, len(self), canonical, None if keep else chunk_bytes):
            if keep:
                kept.append((lo, chunk))
                chunk = list(chunk)
            yield lo, chunk, made
            del chunk, made  # not alive while read_span parses the next chunk
        if keep:
            self._kept = kept
        if canonical is not None:
            self.canonical = canonical

    def read_span(self, each: Callable[[list[Any]], T] | None, lo: int, hi: int,
                  canonical: list[tuple[int, int]] | None = None, chunk_bytes: int | None = None) -> Iterator[
            tuple[int, list[Any], list[T]]]:
        """``read`` of events ``lo`` to ``hi - 1`` (their chunks: ``bounds``), never kept; with ``canonical``, the
        parts whose bytes are orjson's dump of their events are appended to it. The chunks are the whole document's
        (``bounds(chunk_bytes)``) cut at ``lo`` and ``hi``: a span read alone and a full read part alike."""
        bounds = [lo, *(k for k in self.bounds(chunk_bytes) if lo < k < hi), hi] if hi > lo else []
        for a, b in zip(bounds[:-1], bounds[1:]):
            chunk: list[Any] = []
            made: list[T] = []
            for c, d in pairwise(self.bounds(PART_BYTES, a, b)):
                part, text = self._parse(c, d)
                # orjson writes no raw newline (Kineto's own files have one per line): no dump to compare there
                if canonical is not None and b"\n" not in text and orjson.dumps(part) == text:
                    canonical.append((c, d))
                del text
                if each is not None:
                    made.append(each(part))
                chunk += part
            yield a, chunk, made


def fresh_dicts(events: Sequence[Any]) -> bool:
    """Whether ``event_chunks(events)`` gives dicts no one else holds (a large document's, parsed for the caller),
    which the caller may then change in place."""
    return isinstance(events, Events) and not events.shares_dicts


def event_chunks(events: Sequence[Any], chunk_bytes: int | None = None) -> Iterator[tuple[int, list[Any]]]:
    """Chunks of ``Events`` (of about ``chunk_bytes``), or one chunk (a shallow copy) of any other sequence."""
    if isinstance(events, Events):
        return events.chunks(chunk_bytes)
    return iter([(0, list(events))])


def event_reads(events: Sequence[Any], each: Callable[[list[Any]], T]) -> Iterator[tuple[int, list[Any], list[T]]]:
    """``Events.read(each)``, or one chunk (a shallow copy) of any other sequence, with no ``each`` taken."""
    if isinstance(events, Events):
        return events.read(each)
    return iter([(0, list(events), [])])

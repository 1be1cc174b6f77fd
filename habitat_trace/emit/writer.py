"""``write_trace(document, out)``: serialize a target trace (pipeline.document.TargetDocument) as Kineto JSON.

Emit decides nothing: which events change, to what, and what the header says come with the document. Times are
int64 ns inside and written as µs with exactly three decimals (``orjson.Fragment``), so a trace scaled to its own
GPU re-reads to the same nanoseconds. Only events whose times changed and GPU events (whose args gain
``habitat_origin_dur_us``, ``habitat_method`` and ``habitat_reason``) change: copied where the input's event dicts are
shared (a small trace's, kept parsed), changed in place where they were parsed for this write alone. The output is
streamed: the top-level keys, then the events one chunk at a time (re-parsed from the input's bytes, or where ingest
found those bytes orjson's own, edited as bytes: emit.splice), so the whole output never sits in memory; the file
appears atomically (temp file + rename), its bytes those of ``orjson.dumps`` of the whole document. A small document
written again (scale --to all) is formatted from a template of its events (``_templated``: the same bytes), and
``WriteBehind`` compresses and writes one trace on a thread while the caller predicts the next.

Output paths (``write_pieces``): ``-`` is stdout (never gzipped); an existing character device or FIFO
(``/dev/null``, a named pipe) is opened and written like a shell redirect, never replaced; a block device or
socket is refused; a symlink is followed: the file it points to is replaced atomically and the link kept.
"""
from __future__ import annotations

import gzip
import operator
import os
import re
import secrets
import signal
import stat
import sys
import threading
import zlib
from collections import deque
from dataclasses import dataclass
from functools import partial
from itertools import compress, pairwise, repeat
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import numpy as np
import orjson

from habitat_trace.emit import halves, splice
from habitat_trace.emit.splice import json_items, method_keys, method_texts
from habitat_trace.emit.numbers import us_fragments, us_texts
from habitat_trace.errors import OutputError, TraceFormatError
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.events import Events, event_chunks, fresh_dicts
from habitat_trace.ingest.fields import take
from habitat_trace.ingest.reader import GZIP_MAGIC
from habitat_trace.ingest.trace import gc_paused
from habitat_trace.interrupts import held
from habitat_trace.pipeline.document import OCCUPANCY_KEYS, Rewrite, TargetDocument

# The deflate behind every .gz we write: zlib-ng (python-zlib-ng, a dependency; the stdlib's zlib where it cannot be
# imported). Measured on a 10.7 MB output (OPT, 2026-11-27): zlib level 6 137 ms for 704,329 bytes; zlib-ng level 5
# 44 ms for 705,732 (+0.2%), its level 6 117 ms (674,640), level 3 41 ms (895,133). Level 5 of zlib-ng keeps the
# size of the stdlib's level 6 at a third of its time (scale --to all spent 39 ms a target in it: docs/performance.md).
_deflate: Any
try:
    from zlib_ng import zlib_ng as _deflate

    GZIP_LEVEL = 5
except ImportError:  # pragma: no cover - zlib-ng is a dependency; a build without its wheel still writes .gz
    _deflate = zlib
    GZIP_LEVEL = 6
GZIP_WBITS = 31  # zlib's gzip wrapper (header with mtime 0, CRC and size trailer)
# zlib-ng's output depends on how its input is cut into compress() calls (the stdlib's does not): every .gz is fed
# in blocks of this size whatever pieces the writer yields, so equal documents give equal files
GZIP_BLOCK = 1 << 20

EVENTS_MARK = b"\x00"  # stands for the event array in the dumped document: orjson escapes a NUL in strings
STDOUT = "-"  # -o -: write to stdout
# The writer's chunks of a large trace: 2 MiB of JSON, ~10 MB while parsed and rewritten (ingest's 8 MiB: 40 MB more
# at the peak, which is the write's: the tables and replays are alive then), for no measurable time.
WRITE_CHUNK_BYTES = 1 << 21


def is_stdout(out: Path) -> bool:
    return str(out) == STDOUT


def _special(out: Path) -> bool:
    """An existing non-regular file (symlinks followed): True for a character device or FIFO, which we
    write into; OutputError for anything else (block device, socket)."""
    try:
        mode = out.stat().st_mode
    except OSError:
        return False
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return False
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return True
    raise OutputError(f"{out}: is a block device or socket; write to a regular file, a FIFO, /dev/null or - (stdout)")


def check_output(out: Path, inputs: tuple[Path, ...]) -> None:
    """Refuse an output path that would overwrite an input or cannot be created."""
    out = Path(out)
    if is_stdout(out):
        return
    for src in inputs:
        if out.resolve() == Path(src).resolve():
            raise OutputError(f"{out}: is the input trace; choose another output path (-o)")
    if out.is_dir():
        raise OutputError(f"{out}: is a directory; give a file name (*.pt.trace.json.gz) with -o")
    if _special(out):
        return
    parent = Path(os.path.realpath(out)).parent  # an output symlink: the file it points to is replaced
    if not parent.is_dir():
        raise OutputError(f"{parent}: output directory does not exist; create it or choose another -o")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{parent}: output directory is not writable; fix its permissions or choose another -o")


def apply(rewrite: Rewrite, events: list[Any], first: int, copy: bool = True,
          index: Optional[np.ndarray] = None) -> list[Any]:
    """Events ``first`` .. ``first + len(events) - 1`` as written (``events`` is the caller's own list; with ``copy``
    the dicts in it are copied before they change, never mutated; without, they are the caller's to change).
    ``index``: the events are those event indices instead (ascending; emit.splice's parse path)."""
    _retime(rewrite, events, *_among(rewrite.rows, first, len(events), index), copy)
    _annotate(rewrite, events, first, copy, index)
    return events


def _among(keys: np.ndarray, first: int, n: int, index: Optional[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The ``keys`` (ascending event indices) among the events ``first`` .. ``first + n - 1`` (or ``index``), and
    their positions in the events' list."""
    if index is None:
        lo, hi = np.searchsorted(keys, [first, first + n])
        return keys[lo:hi], keys[lo:hi] - first
    if not len(index):
        return keys[:0], keys[:0]
    lo, hi = np.searchsorted(keys, [index[0], index[-1] + 1])
    pos = np.searchsorted(index, keys[lo:hi])
    hit = index[np.minimum(pos, len(index) - 1)] == keys[lo:hi]
    return keys[lo:hi][hit], pos[hit]


def _retime(r: Rewrite, events: list[Any], rows: np.ndarray, at: np.ndarray, copy: bool) -> None:
    """New times for events ``rows``, which lie at ``at`` in ``events``."""
    ts_f = us_fragments(r.ts[rows])
    dur = r.dur[rows]
    has_dur = dur != NO_TIME
    if not copy:  # the caller's own dicts, changed in place: one C-level pass per key (the same keys, in order)
        mine = take(events, at.tolist())
        deque(map(dict.__setitem__, mine, repeat("ts"), ts_f), maxlen=0)
        deque(map(dict.__setitem__, take(mine, np.flatnonzero(has_dur).tolist()), repeat("dur"),
                  us_fragments(dur[has_dur])), maxlen=0)
        return
    dur_f: list[Any] = [None] * len(rows)
    for j, frag in zip(np.flatnonzero(has_dur).tolist(), us_fragments(dur[has_dur])):
        dur_f[j] = frag
    for i, t, d in zip(at.tolist(), ts_f, dur_f):
        e = dict(events[i]) if copy else events[i]
        e["ts"] = t
        if d is not None:
            e["dur"] = d
        events[i] = e


def _annotate(r: Rewrite, events: list[Any], first: int, copy: bool, index: Optional[np.ndarray]) -> None:
    """The GPU events' args: the origin's duration, the method and reason, the target's occupancy statistics (the
    events themselves are _retime's: copied there when ``copy``)."""
    rows: slice | np.ndarray
    if index is None:
        lo, hi = np.searchsorted(r.gpu_ev, [first, first + len(events)])
        rows, at = slice(lo, hi), r.gpu_ev[lo:hi] - first
    else:
        gpu, at = _among(r.gpu_ev, first, len(events), index)
        rows = np.searchsorted(r.gpu_ev, gpu)
    mine = take(events, at.tolist())
    written = _gpu_args(r, rows, list(map(dict.get, mine, repeat("args"))), copy)
    deque(map(dict.__setitem__, mine, repeat("args"), written), maxlen=0)


def _gpu_args(r: Rewrite, rows: slice | np.ndarray, read: list[Any], copy: bool) -> list[dict[str, Any]]:
    """The args as written of GPU ``rows``; ``read``: their args as read (copied before they change when ``copy``).
    Each change is one C-level pass over the rows (a Python loop per row took 7 us a row: 0.8 s on issue 34's 118k
    kernels), in the order a row's keys were set one row at a time."""
    if set(map(type, read)) <= {dict}:
        args = list(map(dict, read)) if copy else read
    else:
        args = [(dict(a) if copy else a) if isinstance(a, dict) else {} for a in read]
    if r.occupancy is not None:
        changed = np.flatnonzero(np.asarray(r.occupancy[3], dtype=bool)[rows]).tolist()
        some = take(args, changed)
        for key, values in zip(OCCUPANCY_KEYS, r.occupancy):  # the keys the row has
            has = list(compress(range(len(some)), map(dict.__contains__, some, repeat(key))))
            deque(map(dict.__setitem__, take(some, has), repeat(key), take(take(values[rows].tolist(), changed), has)),
                  maxlen=0)
    deque(map(dict.__setitem__, args, repeat("habitat_origin_dur_us"), us_fragments(r.old_dur[rows])), maxlen=0)
    reasons = r.reason[rows].tolist()
    pairs = list(zip(r.method[rows].tolist(), reasons))
    said = {p: method_keys(*p) for p in set(pairs)}  # a few, over every GPU row
    deque(map(dict.update, args, map(said.__getitem__, pairs)), maxlen=0)
    # the input may be a trace we wrote: its reason is not this prediction's
    nowhy = list(compress(range(len(args)), map(operator.not_, reasons)))
    deque(map(dict.pop, take(args, nowhy), repeat("habitat_reason"), repeat(None)), maxlen=0)
    return args


def pieces(document: TargetDocument) -> Iterator[bytes | memoryview]:
    """The output document's JSON bytes, in pieces: the top-level keys around the event array, and the
    events one chunk at a time (parsed again from the input for the lazy ``Events``). Joined, the same
    bytes as ``orjson.dumps`` of the whole document."""
    doc = dict(document.meta)
    doc["traceEvents"] = orjson.Fragment(EVENTS_MARK)
    head, tail = _dumps(doc, document.source, "the top-level keys").split(EVENTS_MARK)
    yield head + b"["
    body = _templated(document)
    if body is not None:
        yield body
        yield b"]" + tail
        return
    yield from _event_parts(document)
    yield b"]" + tail


def _event_parts(document: TargetDocument) -> Iterator[bytes | memoryview]:
    """The written events' JSON without the array's brackets (commas between), in pieces: a chunk at a time,
    spliced from their bytes where ingest found them orjson's own (emit.splice), else parsed again, rewritten and
    dumped; a large trace's later half made by a second process (emit.halves)."""
    events = document.events
    spans = _spans(events)
    if spans is None:
        return halves.commas(_dumped_chunks(document))
    assert isinstance(events, Events)  # _spans' promise
    units = [(a, b, canonical) for lo, hi, canonical in spans
             for a, b in pairwise(events.bounds(WRITE_CHUNK_BYTES, lo, hi))]
    sizes = [events.offset(b) - events.offset(a) for a, b, _ in units]
    return halves.joined(units, partial(_unit, document, events), sizes)


def _dumped_chunks(document: TargetDocument) -> Iterator[bytes | memoryview]:
    """The events of a list or a kept document, each chunk rewritten and dumped, without its list's brackets."""
    events, r = document.events, document.rewrite
    copy = not fresh_dicts(events)  # a large trace's chunks are parsed for this write alone
    for first, chunk in event_chunks(events, WRITE_CHUNK_BYTES):
        dumped = _dumps(apply(r, chunk, first, copy), document.source, f"events #{first}-#{first + len(chunk) - 1}")
        del chunk
        yield memoryview(dumped)[1:-1]


def _unit(document: TargetDocument, events: Events, unit: tuple[int, int, bool]) -> bytes | memoryview:
    """Events ``a`` to ``b - 1`` written: spliced from their bytes (``canonical``), or parsed, rewritten and dumped."""
    a, b, canonical = unit
    r = document.rewrite
    if canonical:
        return splice.spliced(*events.span_bytes(a, b), a, r, partial(_rewrite_some, r, document.source))
    dumped = _dumps(apply(r, events.parse(a, b), a, copy=False), document.source, f"events #{a}-#{b - 1}")
    return memoryview(dumped)[1:-1]


def _spans(events: Sequence[Any]) -> Optional[list[tuple[int, int, bool]]]:
    """(lo, hi, whether orjson's own bytes) covering a large trace's events, from ingest's check
    (Events.canonical); None for a list, a kept document, or where no check ran."""
    if not isinstance(events, Events) or events.shares_dicts or events.canonical is None:
        return None
    out: list[tuple[int, int, bool]] = []
    at = 0
    for lo, hi in events.canonical:
        if lo > at:
            out.append((at, lo, False))
        if out and out[-1][2] and out[-1][1] == lo:
            lo = out.pop()[0]  # one span across ingest's chunks
        out.append((lo, hi, True))
        at = hi
    if at < len(events):
        out.append((at, len(events), False))
    return out


def _rewrite_some(r: Rewrite, source: Path, events: list[Any], index: np.ndarray) -> list[bytes]:
    """emit.splice's parse path: events ``index`` (parsed for this write) rewritten and dumped one by one."""
    apply(r, events, 0, copy=False, index=index)
    try:
        return list(map(orjson.dumps, events))
    except TypeError:
        for i, e in zip(index.tolist(), events):
            _dumps(e, source, f"event #{i}")
        raise


# --- a kept document written again (scale --to all: one trace, 52 targets) ---------------------------------------
# From its second write on, a document whose events are kept parsed (ingest.events.KEEP_PARSED_BYTES) is written
# from a template made once: its events dumped with a marker (_MARK: kind, event index) where _retime and _annotate
# put their values (each time; each GPU event's occupancy keys it has, and after habitat_origin_dur_us, the origin's
# and the same for every target, the keys method_keys adds last),
# split into the static JSON between the markers. A write formats the values and joins them with the static pieces:
# the same bytes as dumping the rewritten events (tests/test_emit_template.py: every catalog target of real traces),
# without copying and dumping every event per target. The template is made for one set of GPU rows and origin
# durations; a rewrite of other ones (tables retimed in memory share the events) or a time set on an event without
# that key is written the plain way, as is a trace whose GPU args already hold our keys (a trace we wrote).
_MARK = re.compile(rb"\x00([TDXYZM])(\d+)\x00")
_OCC_MARKS = (b"X", b"Y", b"Z")  # OCCUPANCY_KEYS, in order
TEMPLATE_KEY = "emit.writer.template"


@dataclass(frozen=True)
class _Template:
    statics: list[bytes]  # the JSON around the slots: one more than the slots
    texts: np.ndarray  # per slot, object: the value as read (a time's, an occupancy key's; None for a method)
    ts_slot: np.ndarray  # per event: the slot of its "ts", -1 without one
    dur_slot: np.ndarray  # the same for "dur"
    occ_slots: tuple[tuple[np.ndarray, np.ndarray], ...]  # per occupancy key: (slots, their GPU rows)
    method_slot: np.ndarray  # per GPU row: the slot of the keys after habitat_origin_dur_us (splice.method_keys)
    gpu_ev: np.ndarray  # the GPU rows' event indices it was made for
    old_dur: np.ndarray  # and their origin durations


def _templated(document: TargetDocument) -> Optional[bytes]:
    """The event array's inner JSON written from the kept document's template (made at its second write); None
    where it does not apply (above)."""
    events = document.events
    if not isinstance(events, Events) or not events.shares_dicts:
        return None
    memo = events.derived
    if TEMPLATE_KEY not in memo:
        memo[TEMPLATE_KEY] = None  # the first write: plain
        return None
    if memo[TEMPLATE_KEY] is None:
        r = document.rewrite
        memo[TEMPLATE_KEY] = _make_template([e for _, chunk in event_chunks(events) for e in chunk], r.gpu_ev,
                                            r.old_dur) or False
    return _fill(memo[TEMPLATE_KEY], document.rewrite) if memo[TEMPLATE_KEY] else None


def _make_template(events: list[Any], gpu_ev: np.ndarray, old_dur: np.ndarray) -> Optional[_Template]:
    n = len(events)
    gpu_row = np.full(n, -1, dtype=np.int64)
    gpu_row[gpu_ev] = np.arange(len(gpu_ev))
    od = dict(zip(np.asarray(gpu_ev).tolist(), us_texts(old_dur)))
    marked: list[Any] = []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            if gpu_row[i] >= 0:
                return None
            marked.append(e)
            continue
        m = dict(e)
        if "ts" in m:
            m["ts"] = orjson.Fragment(b"\x00T%d\x00" % i)
        if "dur" in m:
            m["dur"] = orjson.Fragment(b"\x00D%d\x00" % i)
        if gpu_row[i] >= 0:
            a = m.get("args")
            args = dict(a) if isinstance(a, dict) else {}
            if any(k.startswith("habitat_") for k in args):
                return None
            for key, mark in zip(OCCUPANCY_KEYS, _OCC_MARKS):
                if key in args:
                    args[key] = orjson.Fragment(b"\x00%s%d\x00" % (mark, i))
            # the slot after the origin's duration holds the keys method_keys adds after it
            args["habitat_origin_dur_us"] = orjson.Fragment(od[i] + b"\x00M%d\x00" % i)
            m["args"] = args
        marked.append(m)
    parts = _MARK.split(orjson.dumps(marked)[1:-1])
    kinds, rows = np.array(parts[1::3], dtype=object), np.array([int(x) for x in parts[2::3]], dtype=np.int64)
    texts = np.empty(len(rows), dtype=object)
    slot_of = {}
    fields: list[tuple[bytes, Optional[str]]] = [(b"T", "ts"), (b"D", "dur"), *zip(_OCC_MARKS, OCCUPANCY_KEYS),
                                                  (b"M", None)]
    for mark, name in fields:
        at = np.flatnonzero(kinds == mark)
        slot_of[mark] = at
        if name in ("ts", "dur"):
            texts[at] = [orjson.dumps(events[i][name]) for i in rows[at].tolist()]
        elif name is not None:
            texts[at] = [orjson.dumps(events[i]["args"][name]) for i in rows[at].tolist()]
    ts_slot, dur_slot = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    ts_slot[rows[slot_of[b"T"]]] = slot_of[b"T"]
    dur_slot[rows[slot_of[b"D"]]] = slot_of[b"D"]
    method_slot = np.full(len(gpu_ev), -1, dtype=np.int64)
    method_slot[gpu_row[rows[slot_of[b"M"]]]] = slot_of[b"M"]
    occ = tuple((slot_of[k], gpu_row[rows[slot_of[k]]]) for k in _OCC_MARKS)
    return _Template(parts[0::3], texts, ts_slot, dur_slot, occ, method_slot, np.asarray(gpu_ev).copy(),
                     np.asarray(old_dur).copy())


def _fill(t: _Template, r: Rewrite) -> Optional[bytes]:
    if not (np.array_equal(t.gpu_ev, r.gpu_ev) and np.array_equal(t.old_dur, r.old_dur)):
        return None
    ts_at = t.ts_slot[r.rows]
    dur = r.dur[r.rows]
    timed = dur != NO_TIME
    dur_at = t.dur_slot[r.rows[timed]]
    if (ts_at < 0).any() or (dur_at < 0).any():
        return None  # _retime would add the key: the plain write
    values = t.texts.copy()
    values[ts_at] = us_texts(r.ts[r.rows])
    values[dur_at] = us_texts(dur[timed])
    if r.occupancy is not None:
        changed = np.asarray(r.occupancy[3], dtype=bool)
        for (at, j), column in zip(t.occ_slots, r.occupancy):
            new = json_items(column[j])
            if new is None:
                return None
            keep = ~changed[j]
            new[keep] = values[at][keep]
            values[at] = new
    pairs = list(zip(r.method.tolist(), r.reason.tolist()))
    said = method_texts(pairs)
    values[t.method_slot] = list(map(said.__getitem__, pairs))
    out: list[bytes] = [b""] * (2 * len(values) + 1)
    out[0::2] = t.statics
    out[1::2] = values.tolist()
    return b"".join(out)


def _dumps(value: Any, path: Path, what: str) -> bytes:
    """orjson.dumps, with a one-line error for what no JSON writer of ours can write (an integer beyond 64 bits:
    the input was read by the whole-document parser, which accepts it)."""
    try:
        return orjson.dumps(value)
    except TypeError as exc:
        raise TraceFormatError(f"{path}: {what} hold a value that cannot be written back ({exc}); Kineto writes no "
                               "integer beyond 64 bits: fix or drop it, or export the trace again") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_trace(document: TargetDocument, out: Path) -> Path:
    """Write the target trace to ``out`` (gzip when it ends with .gz), streamed one chunk of events at a
    time; returns ``out``."""
    out = Path(out)
    check_output(out, (document.source,))
    with gc_paused():  # the chunks' dicts are freed by reference counting; see ingest.trace.gc_paused
        return write_pieces(pieces(document), out)


class _Aborted(Exception):
    """A write behind (WriteBehind) stopped before its rename."""


class _Gate:
    """The rename of a write behind, against its abort: under one lock, so a write is either renamed into place
    before the abort or never."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False

    def rename(self, tmp: str, target: Path) -> None:
        with self._lock:
            if self._stopped:
                raise _Aborted
            os.replace(tmp, target)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True


class WriteBehind:
    """Target traces of a small document (its events kept parsed: ``behind``) written on a thread behind the caller, one
    at a time: a trace's bytes are made here (Python), its compression and the file's writes run on the thread while
    the caller predicts the next target (zlib-ng's deflate, like the stdlib's, and the writes release the GIL: scale
    --to all of a 16k-event trace spent 39 ms a target in the stdlib's zlib at level 6, ~13 in zlib-ng's 5). A large
    document, stdout or a device is written in place, as ``write_trace`` does. ``submit(document, out, done)``:
    ``done(out)`` runs in the caller's thread once the file is in place (in a later ``submit`` or in ``drain``), the
    write's error is raised there; ``abort()`` (on an interrupt): a write in flight is renamed into place only if it
    got there before the abort (the gate), and returns whether it did (its ``done`` is the caller's to run then)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled  # False: every write in place (no spare CPU for the thread)
        self._thread: Optional[threading.Thread] = None
        self._finished = threading.Event()
        self._gate = _Gate()
        self._out: Optional[tuple[Path, Callable[[Path], Any]]] = None
        self._error: Optional[BaseException] = None

    @staticmethod
    def behind(document: TargetDocument, out: Path) -> bool:
        return (isinstance(document.events, Events) and document.events.shares_dicts and not is_stdout(out)
                and not _special(out))

    def submit(self, document: TargetDocument, out: Path, done: Callable[[Path], Any]) -> None:
        self.drain()
        out = Path(out)
        if not (self.enabled and self.behind(document, out)):
            done(write_trace(document, out))
            return
        check_output(out, (document.source,))
        with gc_paused():  # one piece: each call on the thread takes the GIL back (up to a switch interval, 5 ms)
            data = [b"".join(pieces(document))]
        with held():  # the thread that abort() waits for is started: an interrupt here waited for one never run
            self._out, self._error = (out, done), None
            self._finished = threading.Event()
            self._thread = threading.Thread(target=self._run, args=(data, out, self._finished), name="habitat-write",
                                            daemon=True)
            self._thread.start()

    def _run(self, data: list[bytes | memoryview], out: Path, finished: threading.Event) -> None:
        try:
            if hasattr(signal, "pthread_sigmask"):  # Ctrl-C and SIGTERM go to the main thread, waiting in _wait: a
                # signal the kernel handed to this thread would wake it only once this write had landed
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            write_pieces(iter(data), out, gate=self._gate)
        except BaseException as exc:  # raised in the caller's thread by drain()
            self._error = exc
        finally:
            finished.set()

    def _wait(self) -> tuple[Optional[tuple[Path, Callable[[Path], Any]]], Optional[BaseException]]:
        # an Event, not Thread.join: a join that a signal interrupts marks the thread stopped while it still runs
        # (CPython 3.11, threading._wait_for_tstate_lock), and the next join returns at once
        self._finished.wait()
        self._thread, pending, error = None, self._out, self._error
        self._out = self._error = None
        return pending, error

    def drain(self) -> None:
        """Wait for the write in flight; run its ``done`` (or raise its error). The write is forgotten only after its
        ``done`` has run, so a signal that lands in between leaves it to ``abort`` (``done`` may then run twice: the
        caller's is idempotent), not lost: a Ctrl-C there had left an output in place that the report did not count
        (tests/test_issue26.py item 3, "wrote 2 traces" with three written)."""
        if self._thread is None:
            return
        self._finished.wait()
        pending, error = self._out, self._error
        if error is None and pending is not None:
            pending[1](pending[0])
        self._thread, self._out, self._error = None, None, None
        if error is not None:
            raise error

    def abort(self) -> Optional[tuple[Path, Callable[[Path], Any]]]:
        """Stop: the write in flight is not renamed into place unless it already was; returns (path, done) of a
        write that was, None otherwise."""
        self._gate.stop()
        if self._thread is None:
            return None
        pending, error = self._wait()
        return pending if error is None else None


def write_bytes(data: bytes, out: Path, gzipped: bool = False) -> Path:
    """Write JSON bytes to ``out`` atomically (gzip when it ends with .gz, unless ``data`` already is
    gzip); returns ``out``."""
    return write_pieces(iter([data]), out, gzipped)


def write_pieces(data: Iterable[bytes | memoryview], out: Path, gzipped: bool = False,
                 gate: Optional["_Gate"] = None) -> Path:
    """Write the concatenated ``data`` to ``out`` (gzip when ``out`` ends with .gz, unless ``data`` already
    is gzip). A regular file appears atomically: a temp file beside it, renamed when complete, removed on any
    error or signal that unwinds (Ctrl-C; the CLI turns SIGTERM into SystemExit). ``-`` is stdout; an existing
    character device or FIFO is written in place; a symlink's target is replaced (module docstring)."""
    out = Path(out)
    gz = out.name.endswith(".gz") and not gzipped
    if is_stdout(out):
        _copy(data, sys.stdout.buffer, False)
        sys.stdout.buffer.flush()
        return out
    if _special(out):
        try:
            with open(out, "wb") as fh:
                _copy(data, fh, gz)
        except OSError as exc:
            raise OutputError(f"{out}: cannot write ({exc.strerror}); choose another -o") from None
        return out
    target = Path(os.path.realpath(out))
    # The temporary file's name is chosen before the file exists (O_EXCL), so the clean-up below knows it wherever a
    # signal lands: with mkstemp, a Ctrl-C between the file's creation and this try left it behind (issue 33, item 10)
    tmp = str(target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        except OSError as exc:
            if isinstance(exc, FileExistsError):
                tmp = ""  # another writer's: not ours to remove
            raise OutputError(f"{out}: cannot write in {target.parent} ({exc.strerror}); "
                              "check the directory's permissions or choose another -o") from None
        with os.fdopen(fd, "wb") as fh:
            _copy(data, fh, gz)
        os.chmod(tmp, 0o666 & ~_umask())  # made 0600 like mkstemp's; the output is an ordinary file
        if gate is None:
            os.replace(tmp, target)
        else:
            gate.rename(tmp, target)
    except BaseException as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"{out}: cannot write ({exc.strerror}); check the directory's permissions") from None
        raise
    return out


def gzip_stream(data: Iterable[bytes | memoryview]) -> Iterator[bytes]:
    """``data`` joined and gzip'd (one member, mtime 0) by the writer's compressor, fed in GZIP_BLOCK blocks."""
    comp = _deflate.compressobj(GZIP_LEVEL, _deflate.DEFLATED, GZIP_WBITS)
    pending = bytearray()
    for piece in data:
        view = memoryview(piece).cast("B")
        if pending:
            take = GZIP_BLOCK - len(pending)
            pending += view[:take]
            view = view[take:]
            if len(pending) < GZIP_BLOCK:
                continue
            yield comp.compress(pending)
            pending = bytearray()
        while len(view) >= GZIP_BLOCK:
            yield comp.compress(view[:GZIP_BLOCK])
            view = view[GZIP_BLOCK:]
        pending += view
    if pending:
        yield comp.compress(pending)
    yield comp.flush()


def gzip_bytes(data: bytes) -> bytes:
    """``data`` gzip'd as every .gz we write: the bytes a streamed write of it produces, however it was cut."""
    return b"".join(gzip_stream([data]))


def _copy(data: Iterable[bytes | memoryview], fh: Any, gz: bool) -> None:
    if gz:
        for block in gzip_stream(data):  # the bytes gzip_bytes makes of the pieces joined
            fh.write(block)
    else:
        for piece in data:
            fh.write(piece)


def copy_trace(src: Path, out: Path) -> Path:
    """Write the file ``src`` to ``out`` unchanged, (de)compressing only when the suffixes differ."""
    check_output(out, (src,))
    raw = Path(src).read_bytes()
    gzipped = raw[:2] == GZIP_MAGIC
    if gzipped and not out.name.endswith(".gz"):
        raw, gzipped = gzip.decompress(raw), False
    return write_bytes(raw, out, gzipped=gzipped)

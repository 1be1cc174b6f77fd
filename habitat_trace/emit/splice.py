"""Spliced writes: the events of a large trace whose bytes are orjson's own dump of them, edited as bytes.

Contract: ``spliced(raw, starts, ends, first, rewrite, rewrite_some)`` returns the same bytes as ``orjson.dumps`` of
events ``first`` .. ``first + len(starts) - 1`` with the rewrite applied (emit.writer.apply), without the list's
brackets, given ``raw``, their bytes, which must be ``orjson.dumps`` of those events without the brackets
(ingest.events.Events.canonical says which are). In such bytes an event that only gets new times is its own bytes with
the numbers after its top-level ``"ts":`` and ``"dur":`` replaced; every other event that changes (a GPU event, whose
args change; a time that is not a number or not found where the search below can prove it top-level) is parsed,
rewritten and dumped as the writer's plain path does (``rewrite_some``). The writer parsed every event again
before (issue 34: 12% of ``scale``'s time on a 272 MB trace, with the retime and the dump 24%).

Finding a key without parsing: in orjson's output a quote inside a string is always escaped, so ``{"ts":`` or
``,"ts":`` is always the key "ts" of some object; it is the event's own when no ``{`` or ``[`` lies between the event's
opening brace and it (a bracket inside a string makes the event take the parse path: never wrong, only slower).
orjson's output has no whitespace and no duplicate keys (a chunk with either is not canonical), so the first such key
is the event's only one, and a number runs until the first byte that no JSON number holds.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import orjson

from habitat_trace.emit.numbers import us_texts
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.pipeline.document import Rewrite

COLON, QUOTE, COMMA, OPENER = ord(":"), ord('"'), ord(","), ord("{")
CASE = 0x20  # OR 0x20 maps '[' onto '{'
NUMBER = np.zeros(256, dtype=bool)  # the bytes of a JSON number as orjson writes it (1.8446744073709552e+19)
NUMBER[np.frombuffer(b"0123456789+-.eE", dtype=np.uint8)] = True
NUMBER_START = np.zeros(256, dtype=bool)
NUMBER_START[np.frombuffer(b"-0123456789", dtype=np.uint8)] = True
# orjson's longest number is 24 bytes (-1.2345678901234567e-308; an integer 20): a number's end is looked for in
# this many bytes from its start
NUMBER_WIDTH = 25
DUR_KEY = b',"dur":'  # what lies between a Kineto event's ts and its dur

# rewrite_some(events, index): events index[0], index[1], .. (parsed, the caller's) rewritten and dumped one by one
RewriteSome = Callable[[list[Any], np.ndarray], list[bytes]]


def spliced(raw: bytes | memoryview, starts: np.ndarray, ends: np.ndarray, first: int, r: Rewrite,
            rewrite_some: RewriteSome) -> bytes:
    """The written bytes of events ``first`` .. (module docstring); ``starts``, ``ends``: each event's bytes in
    ``raw`` (the separators between them are single commas)."""
    raw = bytes(raw)  # a bytes object's slices are made faster than a memoryview's (0.20 against 0.37 s a 1.1M)
    buf = np.frombuffer(raw, dtype=np.uint8)
    n = len(starts)
    lo, hi = np.searchsorted(r.rows, [first, first + n])
    glo, ghi = np.searchsorted(r.gpu_ev, [first, first + n])
    parse = np.zeros(n, dtype=bool)  # the events that take the parse path
    parse[r.gpu_ev[glo:ghi] - first] = True
    rows = r.rows[lo:hi] - first
    rows = rows[~parse[rows]]
    keys = _Keys(buf)
    ts_at, ts_end = keys.number(starts[rows], ends[rows], b'"ts"')
    timed = r.dur[rows + first] != NO_TIME  # retime sets "dur" only there
    dur_at = np.full(len(rows), -1, dtype=np.int64)
    dur_end = dur_at.copy()
    dur_at[timed], dur_end[timed] = keys.number(starts[rows[timed]], ends[rows[timed]], b'"dur"')
    lost = (ts_at < 0) | (timed & (dur_at < 0))
    parse[rows[lost]] = True
    rows, ts_at, ts_end, dur_at, dur_end, timed = (a[~lost] for a in (rows, ts_at, ts_end, dur_at, dur_end, timed))
    at = [ts_at, dur_at[timed]]
    end = [ts_end, dur_end[timed]]
    texts = us_texts(r.ts[rows + first]) + us_texts(r.dur[rows[timed] + first])
    whole = np.flatnonzero(parse)
    if len(whole):
        events = _loads_some(raw, starts[whole], ends[whole])
        texts += rewrite_some(events, whole + first)
        at.append(starts[whole])
        end.append(ends[whole])
    return _splice(raw, buf, np.concatenate(at), np.concatenate(end), texts)


def _loads_some(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> list[Any]:
    """The events at ``starts``/``ends`` in ``raw``, parsed in one call."""
    parts = list(map(raw.__getitem__, map(slice, starts.tolist(), ends.tolist())))
    return list(orjson.loads(b"".join((b"[", b",".join(parts), b"]"))))


def _splice(raw: bytes, buf: np.ndarray, at: np.ndarray, end: np.ndarray, texts: list[bytes]) -> bytes:
    """``raw`` with bytes ``at[k]`` .. ``end[k] - 1`` replaced by ``texts[k]`` (the ranges do not overlap)."""
    if not len(at):
        return raw
    order = np.argsort(at, kind="stable")
    gap_lo = np.concatenate(([0], end[order]))
    gap_hi = np.concatenate((at[order], [len(raw)]))
    gaps = np.empty(len(gap_lo), dtype=object)
    # most gaps between a new ts and a new dur are this one: one object for all, not a slice each
    same = np.flatnonzero(gap_hi - gap_lo == len(DUR_KEY))
    same = same[(buf[gap_lo[same, None] + np.arange(len(DUR_KEY))] == np.frombuffer(DUR_KEY, np.uint8)).all(axis=1)]
    gaps[same] = DUR_KEY
    cut = np.ones(len(gaps), dtype=bool)
    cut[same] = False
    cut = np.flatnonzero(cut)
    gaps[cut] = list(map(raw.__getitem__, map(slice, gap_lo[cut].tolist(), gap_hi[cut].tolist())))
    new = np.empty(len(texts), dtype=object)
    new[:] = texts
    out = np.empty(2 * len(order) + 1, dtype=object)
    out[0::2] = gaps
    out[1::2] = new[order]
    return b"".join(out.tolist())


class _Keys:
    """Where a chunk's object keys end (its colons after a quote) and its opening brackets lie."""

    def __init__(self, buf: np.ndarray) -> None:
        self.buf = buf
        marks = np.flatnonzero((buf == COLON) | ((buf | CASE) == OPENER))  # one pass for both
        colons = marks[(buf[marks] == COLON) & (marks >= 1)]
        self.colons = colons[buf[colons - 1] == QUOTE]
        self.openers = marks[buf[marks] != COLON]
        # the bytes from each offset on, NUMBER_WIDTH of them (a view; zeros after the end)
        padded = np.concatenate((buf, np.zeros(NUMBER_WIDTH, dtype=np.uint8)))
        self.windows = np.lib.stride_tricks.as_strided(padded, (len(buf), NUMBER_WIDTH), (1, 1), writeable=False)

    def number(self, starts: np.ndarray, ends: np.ndarray, key: bytes) -> tuple[np.ndarray, np.ndarray]:
        """Per event (its bytes' ``starts`` and ``ends``, ascending): the start and end of the number after its
        top-level ``key`` (a JSON string token), -1 where the search cannot prove one (module docstring)."""
        buf, c = self.buf, self.colons
        c = c[c > len(key)]  # room for the key and the byte before it
        for back, byte in enumerate(reversed(key[:-1]), start=2):  # the last byte, the quote, is _Keys' own
            c = c[buf[c - back] == byte]
        before = buf[c - len(key) - 1]
        c = c[(before == OPENER) | (before == COMMA)]
        at = np.full(len(starts), -1, dtype=np.int64)
        end = at.copy()
        if not len(starts) or not len(c):
            return at, end
        # each event's first such key: the first colon at or after its start, if before its end
        k = np.searchsorted(c, starts)
        found = k < len(c)
        found[found] = c[k[found]] < ends[found]
        colon = c[np.minimum(k, len(c) - 1)]
        # top-level: the event opens with '{' and no bracket lies between that brace and the key
        o = np.searchsorted(self.openers, starts + 1)
        first_open = np.append(self.openers, len(buf))[o]
        found &= (buf[starts] == OPENER) & (first_open > colon)
        value = np.minimum(colon + 1, len(buf) - 1)
        found &= NUMBER_START[buf[value]]
        rows = np.flatnonzero(found)
        window = NUMBER[self.windows[value[rows]]]
        window[:, -1] = False  # never a number that long: each row's end is found
        at[rows] = value[rows]
        end[rows] = value[rows] + np.argmin(window, axis=1)
        return at, end

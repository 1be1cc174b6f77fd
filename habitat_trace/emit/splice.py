"""Spliced writes: the events of a large trace whose bytes are orjson's own dump of them, edited as bytes.

Contract: ``spliced(raw, starts, ends, first, rewrite, rewrite_some)`` returns the same bytes as ``orjson.dumps`` of
events ``first`` .. ``first + len(starts) - 1`` with the rewrite applied (emit.writer.apply), without the list's
brackets, given ``raw``, their bytes, which must be ``orjson.dumps`` of those events without the brackets
(ingest.events.Events.canonical says which are). In such bytes an event that changes is its own bytes with the numbers
after its top-level ``"ts":`` and ``"dur":`` replaced and, for a GPU event, its args edited as ``_gpu_edits`` says;
an event the search below cannot prove (a time that is not a number, a key not provably the event's own, args that
are not a flat last key, a chunk of a trace we wrote) is parsed, rewritten and dumped as the writer's plain path does
(``rewrite_some``). The writer parsed every event again before (issue 34: 12% of ``scale``'s time on a 272 MB trace,
with the retime and the dump 24%).

Finding a key without parsing: in orjson's output a quote inside a string is always escaped, so ``{"ts":`` or
``,"ts":`` is always the key "ts" of some object; it is the event's own when no ``{`` or ``[`` lies between the event's
opening brace and it (a bracket inside a string makes the event take the parse path: never wrong, only slower).
orjson's output has no whitespace and no duplicate keys (a chunk with either is not canonical), so the first such key
is the event's only one, and a number runs until the first byte that no JSON number holds.
"""
from __future__ import annotations

from itertools import compress, repeat
from typing import Any, Callable, Iterable, Optional

import numpy as np
import orjson

from habitat_trace.emit.numbers import us_matrix, us_texts
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.scan import escaped_quotes
from habitat_trace.pipeline.document import OCCUPANCY_KEYS, Rewrite

COLON, QUOTE, COMMA, OPENER, CLOSER = ord(":"), ord('"'), ord(","), ord("{"), ord("}")
CASE = 0x20  # OR 0x20 maps '[' onto '{'
MARKS = bytes(int(b in b":[{}") for b in range(256))  # 1 for the bytes _Keys finds: colons, openers, closing braces
QUOTES_OPENERS = bytes(int(b in b'"[{') for b in range(256))  # what _Keys._quoted_brackets reads
NUMBER = np.zeros(256, dtype=bool)  # the bytes of a JSON number as orjson writes it (1.8446744073709552e+19)
NUMBER[np.frombuffer(b"0123456789+-.eE", dtype=np.uint8)] = True
NUMBER_START = np.zeros(256, dtype=bool)
NUMBER_START[np.frombuffer(b"-0123456789", dtype=np.uint8)] = True
# orjson's longest number is 24 bytes (-1.2345678901234567e-308; an integer 20): a number's end is looked for in
# this many bytes from its start
NUMBER_WIDTH = 25
DUR_KEY = b',"dur":'  # what lies between a Kineto event's ts and its dur
ORIGIN_KEY = b'"habitat_origin_dur_us":'
OURS = (b'"habitat_origin_dur_us"', b'"habitat_method"', b'"habitat_reason"')  # the keys the writer sets or pops

# rewrite_some(events, index): events index[0], index[1], .. (parsed, the caller's) rewritten and dumped one by one
RewriteSome = Callable[[list[Any], np.ndarray], list[bytes]]


def spliced(raw: bytes | memoryview, starts: np.ndarray, ends: np.ndarray, first: int, r: Rewrite,
            rewrite_some: RewriteSome) -> bytes:
    """The written bytes of events ``first`` .. (module docstring); ``starts``, ``ends``: each event's bytes in
    ``raw`` (the separators between them are single commas)."""
    raw = bytes(raw)  # a bytes object's slices are made faster than a memoryview's (0.20 against 0.37 s a 1.1M)
    n = len(starts)
    lo, hi = np.searchsorted(r.rows, [first, first + n])
    glo, ghi = np.searchsorted(r.gpu_ev, [first, first + n])
    keys = _Keys(raw)
    rows = r.rows[lo:hi] - first
    ts_at, ts_end = keys.number(starts[rows], ends[rows], b'"ts"')
    timed = r.dur[rows + first] != NO_TIME  # retime sets "dur" only there
    dur_at = np.full(len(rows), -1, dtype=np.int64)
    dur_end = dur_at.copy()
    dur_at[timed], dur_end[timed] = keys.number(starts[rows[timed]], ends[rows[timed]], b'"dur"')
    parse = np.zeros(n, dtype=bool)  # the events that take the parse path
    parse[rows[(ts_at < 0) | (timed & (dur_at < 0))]] = True
    gpu = r.gpu_ev[glo:ghi] - first
    g_row, g_at, g_end, g_texts, g_bad = _gpu_edits(raw, keys, starts[gpu], ends[gpu], r, glo, ghi)
    parse[gpu[g_bad]] = True
    keep = ~parse[rows]
    kept = ~parse[gpu[g_row]]
    raw, n_at, n_end, texts = _overwrite(raw, np.concatenate((ts_at[keep], dur_at[keep & timed])),
                                         np.concatenate((ts_end[keep], dur_end[keep & timed])),
                                         np.concatenate((r.ts[rows[keep] + first], r.dur[rows[keep & timed] + first])))
    buf = np.frombuffer(raw, dtype=np.uint8)
    at = [n_at, g_at[kept]]
    end = [n_end, g_end[kept]]
    texts += list(compress(g_texts, kept.tolist()))
    whole = np.flatnonzero(parse)
    if len(whole):
        events = _loads_some(raw, starts[whole], ends[whole])
        texts += rewrite_some(events, whole + first)
        at.append(starts[whole])
        end.append(ends[whole])
    return _splice(raw, buf, np.concatenate(at), np.concatenate(end), texts)


def _overwrite(raw: bytes, at: np.ndarray, end: np.ndarray, ns: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray,
                                                                                   list[bytes]]:
    """``raw`` with each time whose new text (``us_texts(ns)``) is as long as the number at ``at`` .. ``end`` written
    over it in place, vectorized, and the others' (start, end, text) for _splice: most new times keep the length of
    the old (a µs time with three decimals), and a text written in place needs no bytes object of its own nor one
    for the bytes before it."""
    matrix = us_matrix(ns)
    if matrix is None:  # a negative time
        return raw, at, end, us_texts(ns)
    text, length = matrix
    same = (end - at) == length
    if same.any():
        out = np.frombuffer(raw, dtype=np.uint8).copy()
        cols = np.arange(text.shape[1])
        fill = cols < length[same, None]
        out[(at[same, None] + cols)[fill]] = text[same][fill]
        raw = out.tobytes()
    rest = text[~same]
    return raw, at[~same], end[~same], rest.view(f"S{rest.shape[1]}").ravel().tolist()


def _gpu_edits(raw: bytes, keys: "_Keys", starts: np.ndarray, ends: np.ndarray, r: Rewrite, lo: int,
               hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes], np.ndarray]:
    """The edits of GPU rows ``lo`` .. ``hi - 1`` (their events' ``starts``, ``ends``) besides their times, as
    writer._gpu_args makes them: (the row of each edit, its start, end and text), and the rows that take the parse
    path. An edit is proven where the event's args is its last key, an object with no brace inside (so every key
    found in it is its own): each occupancy key it has gets the target's value (a number), and the keys the writer
    adds go before its closing brace. A chunk holding one of those keys (a trace we wrote) parses its GPU events."""
    n = hi - lo
    none = np.zeros(0, dtype=np.int64)
    whole = (np.zeros(1, dtype=np.int64), np.array([len(raw)]))
    if not n or any(keys.key(*whole, k, top=False)[0] >= 0 for k in OURS):
        return none, none, none, [], np.ones(n, dtype=bool)
    colon = keys.key(starts, ends, b'"args"', top=True)
    close = ends - 2  # the args' brace, if args is last
    bad = (colon < 0) | (keys.buf[np.minimum(colon + 1, len(keys.buf) - 1)] != OPENER)
    bad |= keys.next_closer(colon + 2) != close
    row: list[np.ndarray] = []
    at: list[np.ndarray] = []
    end: list[np.ndarray] = []
    texts: list[bytes] = []
    if r.occupancy is not None:
        changed = np.flatnonzero(np.asarray(r.occupancy[3][lo:hi], dtype=bool) & ~bad)
        for key, column in zip(OCCUPANCY_KEYS, r.occupancy):
            k = keys.key(colon[changed] + 2, close[changed], orjson.dumps(key), top=False)
            has = k >= 0
            v_at, v_end = keys.number_after(k[has])
            new = json_items(np.asarray(column[lo:hi])[changed[has]])
            lost = v_at < 0
            if new is None:
                lost[:] = True
            bad[changed[has][lost]] = True
            row.append(changed[has][~lost])
            at.append(v_at[~lost])
            end.append(v_end[~lost])
            texts += [] if new is None else new[~lost].tolist()
    good = np.flatnonzero(~bad)
    said = method_texts(zip(r.method[lo:hi].tolist(), r.reason[lo:hi].tolist()))
    pairs = zip(r.method[lo:hi][good].tolist(), r.reason[lo:hi][good].tolist())
    lead = np.where(colon[good] + 2 == close[good], b"", b",").tolist()  # an empty args takes no comma
    texts += list(map(b"".join, zip(lead, repeat(ORIGIN_KEY), us_texts(r.old_dur[lo:hi][good]),
                                    map(said.__getitem__, pairs))))
    row.append(good)
    at.append(close[good])
    end.append(close[good])
    return np.concatenate(row), np.concatenate(at), np.concatenate(end), texts, bad


def method_keys(method: Any, why: Any) -> dict[str, str]:
    """The last keys of a GPU event's args: the prediction method, and its reason where there is one."""
    return {"habitat_method": str(method), **({"habitat_reason": str(why)} if why else {})}


def method_texts(pairs: Iterable[tuple[Any, Any]]) -> dict[tuple[Any, Any], bytes]:
    """Per distinct (method, reason): its ``method_keys`` as the JSON that follows habitat_origin_dur_us in the args
    (a comma, then the keys without the object's braces); a few, over every GPU row."""
    return {p: b"," + orjson.dumps(method_keys(*p))[1:-1] for p in set(pairs)}


def json_items(column: np.ndarray) -> Optional[np.ndarray]:
    """Each number's JSON text as orjson writes it in a dict (object array); None for a non-numeric column."""
    if column.dtype.kind not in "biuf":
        return None
    items = orjson.dumps(column.tolist())[1:-1].split(b",") if len(column) else []
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


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
    """Where a chunk's object keys end (its colons after a quote) and its brackets lie."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.buf = buf = np.frombuffer(raw, dtype=np.uint8)
        # one C table lookup a byte (bytes.translate, as ingest.scan does) finds them all: 2.5 against 3.4-5.7 ms for
        # the four numpy passes on a 2 MiB chunk
        marks = np.flatnonzero(np.frombuffer(raw.translate(MARKS), dtype=bool))
        char = buf[marks]
        colons = marks[(char == COLON) & (marks >= 3)]  # room for {"" before it
        self.colons = colons[buf[colons - 1] == QUOTE]
        # each key's last two characters, to narrow a search to its key at one compare of the whole list
        self.tails = buf[self.colons - 2].astype(np.uint16) << 8 | buf[self.colons - 3]
        self.openers = marks[(char | CASE) == OPENER]
        self.closers = np.append(marks[char == CLOSER], len(buf))
        # the bytes from each offset on, NUMBER_WIDTH of them (a view; zeros after the end)
        padded = np.concatenate((buf, np.zeros(NUMBER_WIDTH, dtype=np.uint8)))
        self.windows = np.lib.stride_tricks.as_strided(padded, (len(buf), NUMBER_WIDTH), (1, 1), writeable=False)

    def key(self, starts: np.ndarray, ends: np.ndarray, key: bytes, top: bool) -> np.ndarray:
        """Per range [start, end) (ascending, apart): the colon of its first ``key`` (a JSON string token) there,
        -1 where none; with ``top``, each range is an event and -1 also where the key cannot be proven the event's
        own (module docstring)."""
        buf = self.buf
        c = self.colons[self.tails == (key[-2] << 8 | key[-3])]
        c = c[c > len(key)]  # room for the key and the byte before it
        for back, byte in enumerate(reversed(key[:-3]), start=4):  # its last three bytes are known to match
            c = c[buf[c - back] == byte]
        before = buf[c - len(key) - 1]
        c = c[(before == OPENER) | (before == COMMA)]
        out = np.full(len(starts), -1, dtype=np.int64)
        if not len(starts) or not len(c):
            return out
        k = np.searchsorted(c, starts)
        found = k < len(c)
        found[found] = c[k[found]] < ends[found]
        colon = c[np.minimum(k, len(c) - 1)]
        if top:  # the event opens with '{' and no bracket outside its strings lies between that brace and the key
            first_open = np.append(self.openers, len(buf))[np.searchsorted(self.openers, starts + 1)]
            found &= buf[starts] == OPENER
            late = np.flatnonzero(found & (first_open < colon))  # a bracket before the key: in a string, or nested
            found[late] = self._quoted_brackets(starts[late] + 1, colon[late])
        out[found] = colon[found]
        return out

    def _quoted_brackets(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per range [lo, hi) that starts outside any string: whether every '{' and '[' in it lies inside a string
        (a kernel named ``...{lambda()#1}...``: 13% of a ResNet-50 step's kernels took the parse path for it). As
        ingest.scan does over a document, over the ranges' bytes joined (each begins with a key's quote, so no run of
        backslashes crosses into one): a quote is a string's unless escaped (ingest.scan.escaped_quotes), and a bracket
        lies in a string when an odd number of string quotes come before it."""
        if not len(lo):
            return np.zeros(0, dtype=bool)
        joined = b"".join(map(self.raw.__getitem__, map(slice, lo.tolist(), hi.tolist())))
        buf = np.frombuffer(joined, dtype=np.uint8)
        pos = np.flatnonzero(np.frombuffer(joined.translate(QUOTES_OPENERS), dtype=bool))
        byte = buf[pos]
        quote = byte == QUOTE
        quote[np.searchsorted(pos, escaped_quotes(buf, 0, len(buf)))] = False
        row = np.searchsorted(np.cumsum(hi - lo), pos, side="right")  # the range of each quote or bracket
        # the string quotes before each mark; those of the ranges before its own are even in number (a range ends at a
        # key's colon: its strings are whole), so the parity is its own range's
        before = np.cumsum(quote) - quote
        outside = ((byte | CASE) == OPENER) & (before % 2 == 0)
        return np.bincount(row[outside], minlength=len(lo)) == 0

    def number(self, starts: np.ndarray, ends: np.ndarray, key: bytes) -> tuple[np.ndarray, np.ndarray]:
        """Per event (its bytes' ``starts`` and ``ends``, ascending): the start and end of the number after its
        top-level ``key``, -1 where the search cannot prove one (module docstring)."""
        return self.number_after(self.key(starts, ends, key, top=True))

    def number_after(self, colon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The start and end of the number after each ``colon``; -1 where there is none (or no colon)."""
        buf = self.buf
        at = np.full(len(colon), -1, dtype=np.int64)
        end = at.copy()
        value = np.minimum(colon + 1, len(buf) - 1)
        rows = np.flatnonzero((colon >= 0) & NUMBER_START[buf[value]])
        window = NUMBER[self.windows[value[rows]]]
        window[:, -1] = False  # never a number that long: each row's end is found
        at[rows] = value[rows]
        end[rows] = value[rows] + np.argmin(window, axis=1)
        return at, end

    def next_closer(self, at: np.ndarray) -> np.ndarray:
        """The first '}' at or after each offset (the chunk's length where none)."""
        return self.closers[np.minimum(np.searchsorted(self.closers, at), len(self.closers) - 1)]

"""Byte ranges of the ``traceEvents`` elements of a JSON document, found without parsing it.

Contract: ``scan(raw) -> Layout | None``. On a well-formed Chrome trace (an object with one
``traceEvents`` array, or a bare array) the Layout holds each element's [start, end) byte range;
``None`` means "not that shape" (malformed, no or several traceEvents keys, not an array) and the
caller parses the whole document instead, which raises the right error. The scanner checks only the
structure it needs: callers parse every byte with orjson afterwards (the elements in chunks, the rest
with the array emptied), so malformed JSON is still refused there.

Vectorized over blocks of ``block`` bytes: one ``bytes.translate`` finds quotes, brackets and commas (a C
table lookup per byte: 36 ms per 16 MiB with the nonzero, against 62 ms for four numpy comparisons and 79 ms
for a numpy lookup table, measured 2026-11-27); a quote after an odd run of backslashes is escaped; brackets
and commas inside strings are masked by the parity of the unescaped quotes before them; nesting depth is
the cumulative sum of +1 (``{[``) and -1 (``}]``). Only quote parity and depth carry from one block to the
next (escape runs are looked up in the whole buffer), so the masks never cost more than a block.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import orjson

# 4 MiB: each block's masks take a few times this, far below a large trace, and under glibc's largest mmap threshold
# (32 MiB), so the heap reuses them block after block; at 16 MiB every block's arrays (its ~4M offsets: 34 MB) were
# fresh mappings, paged in and zeroed each time: issue 34's 272 MB trace scanned in 1.70-1.83 s user + 0.00-0.12 s
# system against 1.84-2.01 + 0.38-0.53 s (2026-11-27, three runs each)
BLOCK_BYTES = 1 << 22
KEY = "traceEvents"
SPACE = re.compile(rb"[ \t\n\r]*")  # JSON's whitespace

QUOTE, COMMA, BACKSLASH = ord('"'), ord(","), ord("\\")
OPENER, CLOSER = ord("{"), ord("}")  # OR 0x20 maps '[' onto '{' and ']' onto '}'
CASE = 0x20
# 1 for each byte the scan reads, 0 for the others: a translated block is a valid numpy bool array
READS = bytes(int(b in b'",[]{}') for b in range(256))
KEY_TOKEN = re.compile(rb'[ \t\n\r]*("(?:[^"\\]|\\.)*")[ \t\n\r]*:', re.DOTALL)  # a member's key and its colon


@dataclass(frozen=True)
class Layout:
    """Where the event array and its elements lie in the document's bytes."""

    starts: np.ndarray  # int64 byte offset of each element (just after its '[' or ',')
    ends: np.ndarray  # int64 end, exclusive (its ',' or ']'); whitespace around an element is kept
    open: int  # offset of the array's '['
    close: int  # offset of the array's ']'

    def meta_bytes(self, raw: bytes) -> bytes:
        """The document with the event array emptied (``[]``): the rest of the trace, small."""
        return raw[:self.open + 1] + raw[self.close:]


@dataclass(frozen=True)
class _Marks:
    """Brackets and commas outside strings that the layout needs, over the whole document."""

    top_pos: np.ndarray  # those of the outer level: depth before or after is below the element depth
    top_char: np.ndarray  # their byte, with '[' ']' folded onto '{' '}'
    top_depth: np.ndarray  # depth after the character
    commas: np.ndarray  # commas at the element depth (element separators, and others to filter)


def scan(raw: bytes, block: int = BLOCK_BYTES) -> Layout | None:
    """The event array's layout in ``raw`` (a JSON document), or None when it is not a well-formed
    Chrome trace."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    space = SPACE.match(raw)  # the pattern matches the empty string: never None
    start = space.end() if space else 0
    first = raw[start:start + 1]
    if first not in (b"{", b"["):
        return None
    depth = 2 if first == b"{" else 1  # depth of the events' separators: inside the array
    marks = _marks(raw, buf, depth, block)
    if marks is None:
        return None
    span = _array_span(raw, marks) if depth == 2 else _bare_span(raw, marks)
    if span is None:
        return None
    lo, hi = span
    seps = marks.commas[(marks.commas > lo) & (marks.commas < hi)]
    if not len(seps) and SPACE.fullmatch(raw, lo + 1, hi):
        empty = np.zeros(0, dtype=np.int64)
        return Layout(empty, empty, lo, hi)
    starts = np.concatenate(([lo + 1], seps + 1)).astype(np.int64)
    ends = np.concatenate((seps, [hi])).astype(np.int64)
    return Layout(starts, ends, lo, hi)


def escaped_quotes(buf: np.ndarray, a: int, b: int) -> np.ndarray:
    """Offsets of the escaped quotes in buf[a:b]: those after an odd run of backslashes (in a string,
    ``\\"`` is a quote character while ``\\\\"`` ends the string). Runs may reach back before ``a``."""
    lo, hi = max(a - 1, 0), min(b, len(buf)) - 1  # the backslashes just before buf[a:b]
    slashes = np.flatnonzero(buf[lo:hi] == BACKSLASH) + lo  # rare in traces: only here is it per backslash
    quotes = slashes[buf[slashes + 1] == QUOTE] + 1
    run = np.ones(len(quotes), dtype=np.int64)
    live = np.arange(len(quotes))
    k = 2
    while len(live):  # one step per backslash of the longest run (runs are short)
        at = quotes[live] - k
        more = at >= 0
        more[more] = buf[at[more]] == BACKSLASH
        live = live[more]
        run[live] += 1
        k += 1
    return quotes[run % 2 == 1]


def _block(raw: bytes, buf: np.ndarray, a: int, b: int, parity: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Offsets and bytes of the brackets and commas outside strings in raw[a:b] (``buf``: raw as an array), and
    the quote parity after it (``parity``: 1 when raw[a] is inside a string)."""
    pos = np.flatnonzero(np.frombuffer(raw[a:b].translate(READS), dtype=bool))
    pos += a
    char = buf[pos] | CASE  # '"' and ',' have the bit set already
    real = char == QUOTE | CASE
    is_quote = real.copy()
    real[np.searchsorted(pos, escaped_quotes(buf, a, b))] = False
    # at a bracket or comma: the unescaped quotes before it, modulo 256 (only the parity is read: int8 is 1.4x faster)
    quotes_before = np.cumsum(real, dtype=np.int8)
    outside = ((quotes_before & 1) == parity) & ~is_quote
    parity = (parity + int(quotes_before[-1])) & 1 if len(quotes_before) else parity
    return pos[outside], char[outside], parity


def _marks(raw: bytes, buf: np.ndarray, depth: int, block: int) -> _Marks | None:
    parity, level = 0, 0
    tops: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    commas: list[np.ndarray] = []
    for a in range(0, len(buf), block):
        pos, char, parity = _block(raw, buf, a, a + block, parity)
        delta = (char == OPENER).view(np.int8) - (char == CLOSER).view(np.int8)
        after = np.cumsum(delta, dtype=np.int32) + level
        if len(after):
            level = int(after[-1])
            if int(after.min()) < 0:
                return None  # a closer without its opener
        top = np.minimum(after - delta, after) < depth
        tops.append((pos[top], char[top], after[top]))
        commas.append(pos[(char == COMMA) & (after == depth)])
    if parity or level:
        return None  # ends inside a string, or with brackets left open
    top_pos, top_char, top_depth = (np.concatenate([t[i] for t in tops]) for i in range(3))
    return _Marks(top_pos, top_char, top_depth, np.concatenate(commas))


def _bare_span(raw: bytes, marks: _Marks) -> tuple[int, int] | None:
    """A bare event array: its '[' and ']' are the only outer-level characters."""
    if len(marks.top_pos) != 2:
        return None
    lo, hi = (int(p) for p in marks.top_pos)
    return (lo, hi) if raw[lo:lo + 1] == b"[" and raw[hi:hi + 1] == b"]" else None


def _array_span(raw: bytes, marks: _Marks) -> tuple[int, int] | None:
    """The object's one ``traceEvents`` member: the offsets of its array's '[' and ']'."""
    pos, char, dep = marks.top_pos, marks.top_char, marks.top_depth
    # members lie between the outer '{', the commas between them and the outer '}'
    delims = np.flatnonzero((dep == 1) & ((char == COMMA) | (char == OPENER)) | (dep == 0))
    found = []
    for lo_at, hi_at in zip(delims[:-1].tolist(), delims[1:].tolist()):
        key = KEY_TOKEN.match(raw, int(pos[lo_at]) + 1, int(pos[hi_at]))
        if key is None:
            return None
        if _is_events_key(key.group(1)):
            found.append((key.end(), lo_at, hi_at))
    if len(found) != 1:
        return None  # no traceEvents, or a duplicate key: the whole-document parse decides
    colon_end, lo_at, hi_at = found[0]
    # the array's '[' and ']' are the only outer-level characters inside the member, with only
    # whitespace between them and the colon, and the delimiter
    inner = pos[lo_at + 1:hi_at]
    if len(inner) != 2 or raw[inner[0]:inner[0] + 1] != b"[":
        return None
    lo, hi = int(inner[0]), int(inner[1])
    if not SPACE.fullmatch(raw, colon_end, lo) or not SPACE.fullmatch(raw, hi + 1, int(pos[hi_at])):
        return None
    return lo, hi


def _is_events_key(text: bytes) -> bool:
    """``text`` (a JSON string token) spells ``traceEvents``, also with escapes (``"trace\\u0045vents"``)."""
    if text == b'"traceEvents"' or b"\\" not in text:
        return text == b'"traceEvents"'
    try:
        return bool(orjson.loads(text) == KEY)
    except orjson.JSONDecodeError:  # a bad escape: the whole-document parse names the error
        return False

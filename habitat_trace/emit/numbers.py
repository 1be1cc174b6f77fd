"""Times as Kineto writes them: int64 ns as µs text with exactly three decimals, one value or a column at a time.

Contract: ``us_text(ns)`` and ``us_texts(ns)`` give the same bytes for every int64 (a trace scaled to its own GPU
re-reads to the same nanoseconds); ``us_fragments`` wraps them for orjson. Shared by the writer's plain, templated
and spliced paths (emit.writer, emit.splice).
"""
from __future__ import annotations

import numpy as np
import orjson

POW10 = 10 ** np.arange(19, dtype=np.int64)  # 1 .. 10**18: every int64 has at most 19 digits
ZERO = ord("0")
LOW_DIGITS = 9  # the most decimal digits a uint32 always holds


def us_text(ns: int) -> bytes:
    """Integer ns as µs with exactly three decimals: 4457346609398043 -> b"4457346609398.043"."""
    q, r = divmod(abs(ns), 1000)
    return f"{'-' if ns < 0 else ''}{q}.{r:03d}".encode()


def us_texts(ns: np.ndarray) -> list[bytes]:
    """``us_text`` for an int64 array: the hot path of a write (every event's ts and dur). The digits are laid out
    left-aligned in a NUL-padded byte matrix, which numpy hands back as one bytes object per row without its NULs
    (measured on 1.12M values, one process: 0.24 s against 0.37 s for a bytes-format per number on issue 34's
    timestamps, 0.16 s against 0.31 s on durations); int64's minimum, which has no absolute value in int64
    (np.abs wraps it to itself), goes through ``us_text``."""
    a = np.abs(ns)
    wrapped = a < 0
    texts = _texts(*np.divmod(np.where(wrapped, 0, a), 1000))
    for i in np.flatnonzero(ns < 0).tolist():
        texts[i] = b"-" + texts[i]
    for i in np.flatnonzero(wrapped).tolist():
        texts[i] = us_text(int(ns[i]))
    return texts


def _texts(whole: np.ndarray, frac: np.ndarray) -> list[bytes]:
    """``b"%d.%03d" % (w, f)`` for non-negative int64 arrays (``frac`` < 1000)."""
    text, _ = _matrix(whole, frac)
    return text.view(f"S{text.shape[1]}").ravel().tolist()  # numpy's bytes drop the trailing NULs


def us_matrix(ns: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``us_texts(ns)`` as a NUL-padded byte matrix (a row a value, left-aligned) and each row's length; None where
    a value is negative (emit.splice writes those from ``us_texts``)."""
    if len(ns) and ns.min() < 0:
        return None
    return _matrix(ns // 1000, ns % 1000)


def _matrix(whole: np.ndarray, frac: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The digits of ``b"%d.%03d" % (w, f)`` laid out in a NUL-padded matrix, and each row's length: one group of whole
    parts with the same number of digits at a time (a trace's timestamps mostly share theirs). Each group's digits are
    made a digit position at a time in a transposed block (contiguous rows) from uint32 parts of at most nine digits
    (numpy divides uint32 faster than int64, in half the memory): 1.12M timestamps of 13 digits 84 ms against 194 ms
    for int64 columns written in place (2026-11-27, one process, best of 5)."""
    digits = np.maximum(np.searchsorted(POW10, whole, side="right"), 1)  # 10**(d-1) <= w < 10**d
    width = int(digits.max(initial=1)) + 4
    text = np.zeros((len(whole), width), dtype=np.uint8)
    for d in np.flatnonzero(np.bincount(digits)).tolist():  # the digit counts present (np.unique: 10x the time)
        rows = np.flatnonzero(digits == d) if d != width - 4 or digits.min() != d else slice(None)
        w, f = whole[rows], frac[rows]
        part = np.empty((d + 4, len(w)), dtype=np.uint8)  # a row a character
        high = max(d - LOW_DIGITS, 0)  # the digits above the lowest nine: fewer than 10**7 for any int64 // 1000
        if high:
            w, low = np.divmod(w, 10 ** LOW_DIGITS)
            _digits(w.astype(np.uint32), part[:high])
            _digits(low.astype(np.uint32), part[high:d])
        else:
            _digits(w.astype(np.uint32), part[:d])
        _digits(f.astype(np.uint32), part[d + 1:])
        part += ZERO
        part[d] = ord(".")
        text[rows, :d + 4] = part.T
    return text, digits + 4


def _digits(values: np.ndarray, rows: np.ndarray) -> None:
    """The decimal digits of uint32 ``values`` (each below 10**len(rows)) into ``rows`` (a row a digit, the most
    significant first, leading zeros included), as numbers 0-9."""
    for j in range(len(rows) - 1, -1, -1):
        q = values // 10
        rows[j] = values - q * 10
        values = q


def us_fragments(ns: np.ndarray) -> list[orjson.Fragment]:
    """``us_text`` for an int64 array, as orjson Fragments."""
    return list(map(orjson.Fragment, us_texts(ns)))

"""Interval arithmetic on int64 ns arrays (vectorized)."""
from __future__ import annotations

import numpy as np


def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as disjoint sorted segments (starts, ends)."""
    if len(start) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # a new merged segment starts where an interval begins after everything before it ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    seg_end_idx = np.append(np.flatnonzero(new)[1:] - 1, len(s) - 1)
    return s[new], reach[seg_end_idx]


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length covered by the union of [start, end) intervals."""
    a, b = merged(start, end)
    return int((b - a).sum())


def covered(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per query [lo, hi): how much of it the union of [start, end) covers."""
    a, b = merged(start, end)
    if len(a) == 0:
        return np.zeros(len(lo), dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(b - a)))

    def before(t: np.ndarray) -> np.ndarray:  # union length up to t
        i = np.searchsorted(a, t, side="right") - 1
        inside = np.clip(t - a[np.maximum(i, 0)], 0, (b - a)[np.maximum(i, 0)])
        return np.where(i >= 0, cum[np.maximum(i, 0)] + inside, 0)

    return np.maximum(before(np.asarray(hi)) - before(np.asarray(lo)), 0)

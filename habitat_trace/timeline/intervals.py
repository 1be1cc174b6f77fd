"""Interval arithmetic on int64 ns arrays (vectorized): the union of intervals as disjoint sorted segments, its
length, and how much of it lies before a time or inside a window."""
from __future__ import annotations

import numpy as np


def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as disjoint sorted segments (starts, ends), int64."""
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
    return s[new].astype(np.int64), reach[seg_end_idx].astype(np.int64)


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length covered by the union of [start, end) intervals."""
    a, b = merged(start, end)
    return int((b - a).sum())


def covered_before(seg_start: np.ndarray, seg_end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Length of the disjoint sorted segments' union (``merged``'s output) before each time ``t`` (int64,
    non-decreasing in t)."""
    t = np.asarray(t, dtype=np.int64)
    if not len(seg_start):
        return np.zeros(t.shape, dtype=np.int64)
    length = seg_end - seg_start
    before = np.concatenate(([0], np.cumsum(length)))  # covered before segment j starts
    j = np.searchsorted(seg_start, t, side="right") - 1
    inside = np.clip(t - seg_start[np.maximum(j, 0)], 0, length[np.maximum(j, 0)])
    return np.where(j >= 0, before[np.maximum(j, 0)] + inside, 0)


def covered(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per query [lo, hi): how much of it the union of [start, end) covers."""
    seg = merged(start, end)
    return np.maximum(covered_before(*seg, np.asarray(hi)) - covered_before(*seg, np.asarray(lo)), 0)

"""Interval arithmetic on int64 ns arrays (vectorized)."""
from __future__ import annotations

import numpy as np


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length covered by the union of [start, end) intervals."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # a new merged segment starts where an interval begins after everything before it ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    seg_start = s[new]
    seg_end_idx = np.append(np.flatnonzero(new)[1:] - 1, len(s) - 1)
    return int((reach[seg_end_idx] - seg_start).sum())

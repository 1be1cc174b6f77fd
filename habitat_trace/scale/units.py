"""FSDP's wrapped units, inferred from the parameter list alone (a Kineto trace records no module boundaries).

Contract: ``fsdp_units(signatures, wrap) -> (units, warnings)``: half-open ranges of positions in the gradient-ready
order, one per wrapped unit; the positions in no range belong to the root unit. ``wrap="blocks"``: every maximal run
of a repeated block of parameters (same shapes and dtypes, period >= 2, two repeats or more) is one unit per repeat,
found longest first and then in what remains on either side: transformer layers (``ModuleWrapPolicy({Block})``),
a CNN's identical residual blocks. ``wrap="none"``: no units, the whole model is the root (FSDP without an
``auto_wrap_policy``).
"""
from __future__ import annotations

from typing import Any, Hashable, Sequence

import numpy as np
import pandas as pd

MIN_PERIOD = 2  # a unit of one tensor is a module with a single parameter: not what auto-wrap policies wrap
MIN_REPEATS = 2


def fsdp_units(signatures: Sequence[Hashable], wrap: str = "blocks") -> tuple[list[tuple[int, int]], list[str]]:
    """Unit ranges over ``signatures`` (one per parameter, e.g. (shape, dtype)), and warnings (module doc)."""
    if wrap == "none" or len(signatures) < MIN_PERIOD * MIN_REPEATS:
        return [], []
    codes = pd.factorize(pd.Series(list(signatures), dtype=object))[0].astype(np.int64)
    units: list[tuple[int, int]] = []
    _search(codes, 0, len(codes), units)
    if not units:
        return [], ["no repeated block of parameters found: one FSDP unit (the whole model, as FSDP without an "
                    "auto_wrap_policy)"]
    return sorted(units), []


def _search(codes: np.ndarray, lo: int, hi: int, out: list[tuple[int, int]]) -> None:
    """Best run in codes[lo:hi], its repeats appended to ``out``; then the same left and right of it."""
    best = best_run(codes[lo:hi])
    if best is None:
        return
    start, period, repeats = best
    start += lo
    out.extend((start + r * period, start + (r + 1) * period) for r in range(repeats))
    _search(codes, lo, start, out)
    _search(codes, start + repeats * period, hi, out)


def best_run(codes: np.ndarray) -> tuple[int, int, int] | None:
    """(start, period, repeats) of the periodic run covering the most positions, None without one. Ties: the shorter
    period, then the later start. The phase is ambiguous where tensors beside the run look like a block's ends: a
    transformer's final norm before its layers in gradient-ready order (the later phase is right), a CNN stage's
    first block after its identical ones (the earlier one is): the later phase moves at most period - 1 such
    tensors (norm weights in the models measured) into the neighbouring unit."""
    n = len(codes)
    best: tuple[Any, ...] | None = None
    for p in range(MIN_PERIOD, n // MIN_REPEATS + 1):
        same = np.concatenate(([False], codes[:-p] == codes[p:], [False]))
        edges = np.flatnonzero(np.diff(same.astype(np.int8)))
        for a, b in zip(edges[::2].tolist(), edges[1::2].tolist()):  # same[a+1 .. b] true: codes[a:b+p] p-periodic
            length = b - a + p
            reps = length // p
            if reps < MIN_REPEATS:
                continue
            start = a + (length - reps * p)  # the latest phase that keeps every repeat
            key = (reps * p, -p, start)
            if best is None or key > best[0]:
                best = (key, start, p, reps)
    return None if best is None else (int(best[1]), int(best[2]), int(best[3]))

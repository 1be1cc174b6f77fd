"""Vectorized extraction of typed columns from lists of Kineto event dicts.

Fast path: one list comprehension per field and a numpy conversion; a slow, per-element path
only when a value has the wrong type (fuzzed or hand-edited traces), which maps it to the default.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

# int64 ns columns: the event has no such time (NaN or absent ts/dur, metadata, non-X events)
NO_TIME = np.iinfo(np.int64).min

NS_PER_US = 1000
NUMBERS = {int, float, type(None)}  # the types a float64 conversion reads as ``float`` does (None: NaN)


def floats(values: Sequence[Any]) -> np.ndarray:
    """float64 array; None, strings (even "12": the rules Perfetto's importer applies take no string for a time,
    ingest/rules.py) and other junk become NaN. The dtype numpy infers says whether every value is a number: a
    conversion straight to float64 would parse "12" (and the output then broke check, issue 33). Only ints, floats
    and None (a key absent from some events: NaN): one conversion, each value as ``float`` reads it."""
    if set(map(type, values)) <= NUMBERS:
        try:
            return np.array(values, dtype=np.float64)
        except OverflowError:  # an int past a double's range: NaN, one by one below
            pass
    try:
        arr = np.array(values)
        if arr.ndim == 1 and arr.dtype.kind in "fiu":
            return arr.astype(np.float64, copy=False)
    except (TypeError, ValueError, OverflowError):
        pass
    return np.array([math.nan if isinstance(v, str) else _float_or_nan(v) for v in values], dtype=np.float64)


def ints(values: Sequence[Any], default: int = -1) -> np.ndarray:
    """int64 array; missing or non-integral values become ``default``."""
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        arr = np.array([_float_or_nan(v) for v in values], dtype=np.float64)
    bad = ~np.isfinite(arr) | (np.abs(arr) > 2**62)
    if bad.any():
        arr[bad] = default
    return arr.astype(np.int64)


def triples(values: Sequence[Any], default: int = 0) -> np.ndarray:
    """(n, 3) int64 array from [x, y, z] lists (grid, block); malformed entries become ``default``."""
    if not values:
        return np.zeros((0, 3), dtype=np.int64)
    if values.count(None) == len(values):  # runtime calls of a CUDA trace carry none (list.count: one C loop)
        return np.full((len(values), 3), default, dtype=np.int64)
    fill = (default, default, default)  # copies and sets have no grid/block: keep the fast path
    try:
        arr = np.array([fill if v is None else v for v in values], dtype=np.float64)
        if arr.ndim == 2 and arr.shape[1] == 3 and np.isfinite(arr).all():
            return arr.astype(np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    return np.array([_triple(v, default) for v in values], dtype=np.int64).reshape(-1, 3)


def text(values: list[str] | np.ndarray) -> Any:
    """A string column that stays a string column when empty (pandas makes ``[]`` float64). Equal
    strings share one object: a parsed trace holds a new str per event (a 60-byte "cpu_op" each); an object
    array comes with its equal strings shared already (EventFields.names_at)."""
    if isinstance(values, list):
        seen: dict[str, str] = {}
        values = [seen.setdefault(v, v) for v in values]
    return pd.array(values, dtype="str")


def strings(values: Sequence[Any]) -> np.ndarray:
    """``str(v)`` for each value, computed once per distinct value (pids and tids repeat a lot).

    Hashing groups values that compare equal (1, 1.0, True; None and nan), so only ints and strings
    take the grouped path; anything else is stringified one by one.
    """
    if set(map(type, values)) <= {int, str}:  # an int never equals a str: one dict entry per distinct value
        text = {v: str(v) for v in set(values)}  # (a dict, not pd.factorize: 5 against 10 ms on 35k Kineto tids)
        return np.fromiter(map(text.__getitem__, values), dtype=object, count=len(values))
    return np.array([str(v) for v in values], dtype=object)


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """Kineto µs floats to exact int64 ns.

    Splitting off the integer µs first keeps the ns digits exact for relative timestamps
    (a float64 near 4.5e12 µs resolves 0.5 ns) and as exact as the float allows for epoch ones.
    NaN stays representable as the minimum int64 (checked by the caller).
    """
    finite = np.isfinite(us)
    safe = np.where(finite, us, 0.0)
    whole = np.floor(safe)
    ns = whole.astype(np.int64) * NS_PER_US + np.rint((safe - whole) * NS_PER_US).astype(np.int64)
    ns[~finite] = NO_TIME
    return ns


def _float_or_nan(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                return math.nan
        return math.nan
    try:
        return float(v)
    except OverflowError:
        return math.nan


def _triple(v: Any, default: int) -> tuple[int, int, int]:
    if isinstance(v, (list, tuple)) and len(v) == 3:
        out = []
        for x in v:
            f = _float_or_nan(x)
            out.append(int(f) if math.isfinite(f) and abs(f) < 2**62 else default)
        return out[0], out[1], out[2]
    return default, default, default

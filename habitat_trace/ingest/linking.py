"""Link the tables: op nesting per thread, runtime call -> enclosing op, GPU event -> launch call
(CUPTI correlation), GPU event -> op chain and ProfilerStep.

Rules (pinned by tests/test_linking.py):
- ops nest by time containment on their (pid, tid) thread; ties sort the longer op first;
- a call's op is the innermost op on the call's thread whose span contains the call's start;
- a GPU event's launch is the runtime/driver call with the same correlation id (a CUDA-graph launch
  may own several GPU events); its op and step come from that call, else from its External id,
  else (no launch recorded) from its own start time for the step;
- a GPU event belongs to the ProfilerStep whose CPU span contains its launch's start.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


def op_parents(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Parent row (or -1) and depth of each op, by time containment on its thread.

    Equivalent to the classic stack walk over ops sorted by (thread, start, longer first), where an
    op's parent is the stack top after popping ops that ended at or before its start. The stack is
    always the parent chain of the previous op, so the parent is the *nearest earlier op on the
    thread still open at the start* (end > start): a "previous greater" query, answered here for
    all ops at once by binary lifting over a sparse table of running end maxima (O(n log n), no
    per-op Python loop). tests/test_linking.py checks it against the stack walk.
    """
    n = len(ops)
    parent = np.full(n, S.NONE, dtype=np.int64)
    if n == 0:
        return parent, np.zeros(0, dtype=np.int64)
    thread = thread_codes(ops[S.PID], ops[S.TID])
    start = ops[S.TS].to_numpy()
    end = start + ops[S.DUR].to_numpy()
    order = np.lexsort((-end, start, thread))
    th = thread[order]
    first = np.searchsorted(th, th, side="left")  # first sorted position of each op's thread
    prev = previous_open(start[order], end[order], first)
    parent[order] = np.where(prev != S.NONE, order[np.maximum(prev, 0)], S.NONE)
    return parent, depths(parent)


def previous_open(start: np.ndarray, end: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For each i, the largest j in [first[i], i) with end[j] > start[i], or -1."""
    n = len(start)
    levels = [end]  # levels[k][j] = max(end[j - 2**k + 1 : j + 1]) where that range is whole
    while (1 << len(levels)) <= n:
        half = 1 << (len(levels) - 1)
        cur = levels[-1].copy()
        cur[half:] = np.maximum(cur[half:], levels[-1][:-half])
        levels.append(cur)
    pos = np.arange(n, dtype=np.int64) - 1
    for k in range(len(levels) - 1, -1, -1):  # skip whole blocks of ops that closed by start[i]
        size = 1 << k
        can = pos - size + 1 >= first
        jump = can & (levels[k][np.maximum(pos, 0)] <= start)
        pos = np.where(jump, pos - size, pos)
    ok = (pos >= first) & (end[np.maximum(pos, 0)] > start)
    return np.where(ok, pos, S.NONE)


def depths(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each row (one vectorized step per nesting level)."""
    depth = np.zeros(len(parent), dtype=np.int64)
    rows = np.flatnonzero(parent != S.NONE)
    anc = parent[rows]
    while len(rows):
        depth[rows] += 1
        anc = parent[anc]
        keep = anc != S.NONE
        rows, anc = rows[keep], anc[keep]
    return depth


def root_ops(parent: np.ndarray, is_step: np.ndarray) -> np.ndarray:
    """Outermost ancestor of each op that is not a ProfilerStep annotation (steps map to themselves)."""
    root = np.arange(len(parent), dtype=np.int64)
    while True:
        p = parent[root]
        move = (p != S.NONE) & ~is_step[np.maximum(p, 0)]
        if not move.any():
            return root
        root = np.where(move, p, root)


def enclosing_op(ops: pd.DataFrame, parent: np.ndarray, pid: pd.Series, tid: pd.Series,
                 ts: np.ndarray) -> np.ndarray:
    """Innermost op on the same thread whose span contains each time in ``ts`` (-1 if none)."""
    out = np.full(len(ts), S.NONE, dtype=np.int64)
    if len(ops) == 0 or len(ts) == 0:
        return out
    both = thread_codes(pd.concat([ops[S.PID], pid], ignore_index=True),
                        pd.concat([ops[S.TID], tid], ignore_index=True))
    op_thread, q_thread = both[:len(ops)], both[len(ops):]
    start = ops[S.TS].to_numpy()
    end = start + ops[S.DUR].to_numpy()
    for key in np.unique(q_thread):
        rows = np.flatnonzero(op_thread == key)
        q = np.flatnonzero(q_thread == key)
        if len(rows) == 0:
            continue
        rows = rows[np.argsort(start[rows], kind="stable")]
        pos = np.searchsorted(start[rows], ts[q], side="right") - 1
        cand = np.where(pos >= 0, rows[np.maximum(pos, 0)], S.NONE)
        # climb to the first ancestor still open at ts (bounded by the nesting depth)
        while True:
            valid = cand != S.NONE
            closed = np.zeros(len(q), dtype=bool)
            closed[valid] = end[cand[valid]] < ts[q][valid]
            if not closed.any():
                break
            cand[closed] = parent[cand[closed]]
        out[q] = cand
    return out


def thread_codes(pid: pd.Series, tid: pd.Series) -> np.ndarray:
    """One integer per distinct (pid, tid) pair (hashing, no string building)."""
    p = pd.factorize(pid.to_numpy(dtype=object))[0]  # an object array hashes 2x faster than a "str" column
    t = pd.factorize(tid.to_numpy(dtype=object))[0]
    return p.astype(np.int64) * (int(t.max(initial=0)) + 1) + t


def step_table(ops: pd.DataFrame) -> pd.DataFrame:
    names = ops[S.NAME]
    codes, uniq = pd.factorize(names)  # match the regex once per distinct name
    is_step_name = np.array([bool(STEP_NAME.match(str(u))) for u in uniq], dtype=bool)
    m = pd.Series(is_step_name[codes] if len(uniq) else np.zeros(len(names), dtype=bool), index=names.index)
    steps = ops.loc[m, [S.EVENT, S.NAME, S.TS, S.DUR]].copy()
    steps[S.STEP_NUMBER] = steps[S.NAME].str.extract(STEP_NAME.pattern)[0].astype(np.int64).to_numpy()
    steps["op"] = np.flatnonzero(m.to_numpy())
    steps = steps.sort_values(S.TS, kind="stable").reset_index(drop=True)
    steps[S.END] = steps[S.TS] + steps[S.DUR]
    return steps


def step_of(steps: pd.DataFrame, ts: np.ndarray) -> np.ndarray:
    """Row of the step whose span contains each time (-1 outside every step)."""
    if len(steps) == 0:
        return np.full(len(ts), S.NONE, dtype=np.int64)
    start = steps[S.TS].to_numpy()
    end = steps[S.END].to_numpy()
    pos = np.searchsorted(start, ts, side="right") - 1
    ok = (pos >= 0) & (ts < end[np.maximum(pos, 0)])
    return np.where(ok, pos, S.NONE).astype(np.int64)


def first_row_by_key(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Row of the first occurrence of each query key in ``keys`` (-1 if absent or query < 0)."""
    if len(keys) == 0:
        return np.full(len(query), S.NONE, dtype=np.int64)
    uniq, first = np.unique(keys, return_index=True)
    pos = np.searchsorted(uniq, query)
    pos = np.minimum(pos, len(uniq) - 1)
    hit = (uniq[pos] == query) & (query >= 0)
    return np.where(hit, first[pos], S.NONE).astype(np.int64)

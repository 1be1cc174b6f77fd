"""Lay out GPU events on the target and the CPU waits they cause: one pass in origin time order.

A GPU event starts at the latest of (issue 4):
- its launch call's new end + its launch latency: the origin's ``start - launch end`` when the stream
  was idle at launch (negative when the call returned after the kernel started: kept, so that identity
  reproduces the input; never before the call's start); when it was queued behind earlier work (the
  launch ended before the earlier events on the stream ended) the observed delay is queueing, so the
  latency is the smaller of it and the trace's median idle-stream latency. Kernels of one launch
  (CUDA graphs) share the first one's;
- the latest new end of the earlier events on its stream + the origin gap when it was queued (the
  GPU's own kernel-switch gap), or minus the origin overlap only (Hopper PDL overlaps are kept, none
  added); never before the previous event's new start;
- the new end of the GPU work a cudaStreamWaitEvent made it wait for (links.py), when the origin
  honoured that dependency; a kernel without a launch and without a predecessor keeps its start.
A blocking call (links.blocking_calls) ends at max(start + its pure CPU time, awaited GPU end + the
origin's return latency); the CPU clock shift this creates is a breakpoint of the CPU map (replay.cpu_map).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.emit import links
from habitat_trace.ingest import schema as S


@dataclass(frozen=True)
class Breaks:
    """CPU map breakpoints, one per blocking call in origin end order (see cpumap.cpu_map)."""

    window_start: np.ndarray  # origin start of the wait window (call start, after the previous break)
    end: np.ndarray  # origin end of the blocking call
    new_end: np.ndarray  # its new end


def _launch_latency(trace: Any, code: np.ndarray, order: np.ndarray,
                    dep_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(latency from launch end, gap to previous event on the stream) per GPU row; ``dep_end`` is the
    origin end of the cross-stream work each row waited for (a wait that outlasted the launch is
    queueing too)."""
    gpu, calls = trace.gpu, trace.calls
    ts, end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    launch = gpu[S.LAUNCH].to_numpy()
    has = launch >= 0
    lend = np.where(has, calls[S.END].to_numpy()[np.maximum(launch, 0)] if len(calls) else 0, 0)
    prev = _previous_on_stream(code, order)
    has_prev = prev >= 0
    prev_end = _previous_reach(code, order, end)
    gap = np.where(has_prev, ts - prev_end, 0)
    # The origin's own latency, negative when the launch call returned after the kernel had started
    # (common: kept so that identity reproduces the input), never before the launch call began.
    ldur = np.where(has, calls[S.DUR].to_numpy()[np.maximum(launch, 0)] if len(calls) else 0, 0)
    observed = np.maximum(ts - lend, -ldur)
    queued = has & ((has_prev & (lend <= prev_end)) | (lend <= dep_end))
    idle = has & ~queued
    typical = max(int(np.median(observed[idle])), 0) if idle.any() else 0
    lat = np.where(queued, np.minimum(observed, typical), observed)
    if has.any():  # several GPU events of one launch (CUDA graph): the first one's latency
        first = np.full(len(calls), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, launch[has], lat[has])
        lat = np.where(has, first[np.maximum(launch, 0)], 0)
    gap = np.where(queued | ~has, gap, np.minimum(gap, 0))
    return lat, gap


def _previous_reach(code: np.ndarray, order: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Latest end among the earlier events of each row's stream (a PDL kernel can end before the
    one it overlaps, so the immediate predecessor's end is not enough); 0 for the first."""
    by_stream = order[np.argsort(code[order], kind="stable")]
    reach = pd.Series(end[by_stream]).groupby(code[by_stream]).cummax().to_numpy()
    out = np.zeros(len(code), dtype=np.int64)
    same = np.zeros(len(by_stream), dtype=bool)
    same[1:] = code[by_stream][1:] == code[by_stream][:-1]
    out[by_stream[1:][same[1:]]] = reach[:-1][same[1:]]
    return out


def _previous_on_stream(code: np.ndarray, order: np.ndarray) -> np.ndarray:
    prev = np.full(len(code), S.NONE, dtype=np.int64)
    c = code[order]
    same = np.zeros(len(order), dtype=bool)
    same[1:] = c[1:] == c[:-1]
    prev[order[1:][same[1:]]] = order[:-1][same[1:]]
    return prev


def schedule(trace: Any, dur_new: np.ndarray) -> tuple[np.ndarray, Breaks]:
    """New start (ns) of every GPU row and the CPU breakpoints."""
    gpu, calls = trace.gpu, trace.calls
    code, codes = links.stream_codes(gpu)
    ts = gpu[S.TS].to_numpy()
    order = np.lexsort((np.arange(len(gpu)), ts))
    linker = links.Linker(trace, code, codes)
    blocking, own = links.blocking_calls(trace)
    waits = [linker.sync_wait(int(c), str(calls[S.SYNC_KIND].iat[c]), own) for c in blocking]
    deps = _dependencies(trace, linker)
    dep_end = np.full(len(gpu), np.iinfo(np.int64).min, dtype=np.int64)
    end = gpu[S.END].to_numpy()
    for row, awaited in deps.items():
        dep_end[row] = max(int(end[a]) for a in awaited)
    lat, gap = _launch_latency(trace, code, order, dep_end)
    # a kernel that waited on another stream follows that work by the origin's gap (identity stays exact)
    launch = gpu[S.LAUNCH].to_numpy()
    lend = np.where(launch >= 0, calls[S.END].to_numpy()[np.maximum(launch, 0)] if len(calls) else 0, 0)
    dep_gap = np.where((dep_end > np.iinfo(np.int64).min) & ((launch < 0) | (lend <= dep_end)), ts - dep_end, 0)
    return _run(trace, dur_new, code, order, lat, gap, dep_gap, waits, deps)


def _dependencies(trace: Any, linker: links.Linker) -> dict[int, list[int]]:
    calls, gpu = trace.calls, trace.gpu
    ts, end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    deps: dict[int, list[int]] = {}
    for call in np.flatnonzero((calls[S.SYNC_KIND] == "wait_event").to_numpy()):
        delayed, awaited = linker.wait_dependency(int(call))
        if delayed != S.NONE and end[awaited] <= ts[delayed]:  # only dependencies the origin honoured
            deps.setdefault(delayed, []).append(awaited)
    return deps


def _run(trace: Any, dur_new: np.ndarray, code: np.ndarray, order: np.ndarray, lat: np.ndarray, gap: np.ndarray,
         dep_gap: np.ndarray, waits: list[links.SyncWait], deps: dict[int, list[int]]) -> tuple[np.ndarray, Breaks]:
    gpu, calls = trace.gpu, trace.calls
    ts_l, end_l = gpu[S.TS].tolist(), gpu[S.END].tolist()
    launch_l, lat_l, gap_l = gpu[S.LAUNCH].tolist(), lat.tolist(), gap.tolist()
    code_l, dur_l = code.tolist(), np.asarray(dur_new, dtype=np.int64).tolist()
    cts_l, cend_l = calls[S.TS].tolist(), calls[S.END].tolist()
    waits = sorted(waits, key=lambda w: (cend_l[w.call], w.call))
    by_end = sorted(range(len(ts_l)), key=lambda r: (end_l[r], r))
    start: list[int | None] = [None] * len(ts_l)
    new_end: list[int] = [0] * len(ts_l)
    last_start: dict[int, int] = {}
    last_end: dict[int, int] = {}
    done_new: dict[int, int] = {}  # per stream: max new end of rows that ended (origin) before now
    done_old: dict[int, int] = {}
    b_te: list[int] = []
    b_ws: list[int] = []
    b_new: list[int] = []
    b_shift: list[int] = []
    w_i = done_i = 0
    for r in order.tolist():
        while w_i < len(waits) and cend_l[waits[w_i].call] < ts_l[r]:
            done_i = _advance(by_end, done_i, cend_l[waits[w_i].call], end_l, new_end, code_l, done_new, done_old)
            _wait(waits[w_i], cts_l, cend_l, start, new_end, end_l, done_new, done_old, b_te, b_ws, b_new, b_shift)
            w_i += 1
        c = code_l[r]
        call = launch_l[r]
        if c in last_end:
            lo = max(last_start[c], last_end[c] + gap_l[r])
        else:  # first on its stream: a kernel queued before the window keeps its start
            lo = ts_l[r] if call < 0 else -(1 << 62)
        if call >= 0:
            le = cend_l[call]
            k = bisect_right(b_te, le)
            lo = max(lo, le + (b_shift[k - 1] if k else 0) + lat_l[r])
        for a in deps.get(r, ()):
            if start[a] is not None:
                lo = max(lo, new_end[a] + int(dep_gap[r]))
        start[r], new_end[r] = lo, lo + dur_l[r]
        last_start[c], last_end[c] = lo, max(last_end.get(c, lo), lo + dur_l[r])
    for w in waits[w_i:]:
        done_i = _advance(by_end, done_i, cend_l[w.call], end_l, new_end, code_l, done_new, done_old)
        _wait(w, cts_l, cend_l, start, new_end, end_l, done_new, done_old, b_te, b_ws, b_new, b_shift)
    breaks = Breaks(np.array(b_ws, dtype=np.int64), np.array(b_te, dtype=np.int64), np.array(b_new, dtype=np.int64))
    return np.array(start, dtype=np.int64), breaks


def _advance(by_end: list[int], i: int, t: int, end_l: list[int], new_end: list[int], code_l: list[int],
             done_new: dict[int, int], done_old: dict[int, int]) -> int:
    while i < len(by_end) and end_l[by_end[i]] <= t:
        r = by_end[i]
        c = code_l[r]
        done_new[c] = max(done_new.get(c, new_end[r]), new_end[r])
        done_old[c] = max(done_old.get(c, end_l[r]), end_l[r])
        i += 1
    return i


def _wait(w: links.SyncWait, cts_l: list[int], cend_l: list[int], start: list, new_end: list[int],
          end_l: list[int], done_new: dict[int, int], done_old: dict[int, int], b_te: list[int],
          b_ws: list[int], b_new: list[int], b_shift: list[int]) -> None:
    ts, te = cts_l[w.call], cend_l[w.call]
    ws = max(ts, b_te[-1]) if b_te else ts
    shift = b_shift[-1] if b_shift else 0
    new_start = ts + shift
    aw_new = aw_old = None
    if w.row >= 0 and start[w.row] is not None:
        aw_new, aw_old = new_end[w.row], end_l[w.row]
    elif w.stream == links.ALL and done_new:
        aw_new, aw_old = max(done_new.values()), max(done_old.values())
    elif w.stream in done_new:
        aw_new, aw_old = done_new[w.stream], done_old[w.stream]
    end = new_start + (te - ts)
    if aw_new is not None:
        wait_old = min(max(aw_old - ts, 0), te - ts)
        end = max(new_start + (te - ts) - wait_old, aw_new + te - max(ts, aw_old))
    end = max(end, ws + shift)  # overlapping waits (two threads): keep the CPU map monotone
    b_te.append(te)
    b_ws.append(ws)
    b_new.append(end)
    b_shift.append(end - te)

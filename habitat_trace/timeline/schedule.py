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
CPU times (launch and blocking calls) are first read on the target host's clock (cpuclock.CpuClock: without the
profiler's overhead, at a what-if host speed); what the GPU did and how long a call waited on it stay origin facts.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.timeline import links
from habitat_trace.timeline.cpuclock import CpuClock


@dataclass(frozen=True)
class Breaks:
    """CPU map breakpoints, one per blocking call in origin end order (see timeline.replay.cpu_map)."""

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


def schedule(trace: Any, dur_new: np.ndarray, clock: CpuClock | None = None,
             end_floor: np.ndarray | None = None) -> tuple[np.ndarray, Breaks]:
    """New start (ns) of every GPU row and the CPU breakpoints (on ``clock``'s time: CpuClock.identity() when
    None); ``end_floor``: per GPU row, a new end it cannot end before (a collective held until the last rank has
    joined, timeline/joint.py; NO_FLOOR where none): the row lasts max(its duration, floor - its new start)."""
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
    return _run(trace, dur_new, code, order, lat, gap, dep_gap, waits, deps, clock or CpuClock.identity(),
                end_floor)


def _dependencies(trace: Any, linker: links.Linker) -> dict[int, list[int]]:
    calls, gpu = trace.calls, trace.gpu
    ts, end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    deps: dict[int, list[int]] = {}
    for call in np.flatnonzero((calls[S.SYNC_KIND] == "wait_event").to_numpy()):
        delayed, awaited = linker.wait_dependency(int(call))
        if delayed != S.NONE and end[awaited] <= ts[delayed]:  # only dependencies the origin honoured
            deps.setdefault(delayed, []).append(awaited)
    return deps


NO_FLOOR = np.iinfo(np.int64).min  # end_floor's "no floor"


class _Pass:
    """State of the one pass: new GPU times so far, per-stream progress, and the CPU breakpoints."""

    def __init__(self, trace: Any, dur_new: np.ndarray, code: np.ndarray, lat: np.ndarray, gap: np.ndarray,
                 dep_gap: np.ndarray, deps: dict[int, list[int]], clock: CpuClock,
                 end_floor: np.ndarray | None = None) -> None:
        gpu, calls = trace.gpu, trace.calls
        self.ts, self.end = gpu[S.TS].tolist(), gpu[S.END].tolist()
        self.launch, self.lat, self.gap = gpu[S.LAUNCH].tolist(), lat.tolist(), gap.tolist()
        self.dep_gap, self.deps = dep_gap.tolist(), deps
        self.code, self.dur = code.tolist(), np.asarray(dur_new, dtype=np.int64).tolist()
        held = np.flatnonzero(end_floor > NO_FLOOR) if end_floor is not None else np.zeros(0, dtype=np.int64)
        self.floor = dict(zip(held.tolist(), np.asarray(end_floor)[held].tolist())) if len(held) else {}
        self.call_ts0, self.call_end0 = calls[S.TS].tolist(), calls[S.END].tolist()  # origin
        if clock.is_identity:
            self.call_ts, self.call_end = self.call_ts0, self.call_end0
        else:  # on the target host's clock
            self.call_ts = clock(calls[S.TS].to_numpy()).tolist()
            self.call_end = clock(calls[S.END].to_numpy()).tolist()
        self.by_end = sorted(range(len(self.ts)), key=lambda r: (self.end[r], r))
        self.done_i = 0
        self.start: list[int | None] = [None] * len(self.ts)
        self.new_end = [0] * len(self.ts)
        self.last_start: dict[int, int] = {}
        self.last_end: dict[int, int] = {}  # per stream: latest new end so far
        self.done_new: dict[int, int] = {}  # per stream: max new end of rows that ended (origin) by now
        self.done_old: dict[int, int] = {}
        self.b_ws: list[int] = []
        self.b_te: list[int] = []
        self.b_new: list[int] = []
        self.b_shift: list[int] = []

    def place(self, r: int) -> None:
        """New start of GPU row ``r``: the latest of its launch, stream and dependency constraints."""
        c, call = self.code[r], self.launch[r]
        if c in self.last_end:
            lo = max(self.last_start[c], self.last_end[c] + self.gap[r])
        else:  # first on its stream: a kernel queued before the window keeps its start
            lo = self.ts[r] if call < 0 else -(1 << 62)
        if call >= 0:
            le = self.call_end[call]
            k = bisect_right(self.b_te, le)
            lo = max(lo, le + (self.b_shift[k - 1] if k else 0) + self.lat[r])
        for a in self.deps.get(r, ()):
            if self.start[a] is not None:
                lo = max(lo, self.new_end[a] + self.dep_gap[r])
        end = max(lo + self.dur[r], self.floor[r]) if r in self.floor else lo + self.dur[r]
        self.start[r], self.new_end[r] = lo, end
        self.last_start[c], self.last_end[c] = lo, max(self.last_end.get(c, lo), end)

    def _advance(self, t: int) -> None:
        """Mark rows whose origin end is <= t as done (what a wait ending at t could have awaited)."""
        while self.done_i < len(self.by_end) and self.end[self.by_end[self.done_i]] <= t:
            r = self.by_end[self.done_i]
            c = self.code[r]
            self.done_new[c] = max(self.done_new.get(c, self.new_end[r]), self.new_end[r])
            self.done_old[c] = max(self.done_old.get(c, self.end[r]), self.end[r])
            self.done_i += 1

    def _awaited(self, w: links.SyncWait) -> tuple[int, int] | None:
        """(new end, origin end) of the GPU work ``w`` waits for, None when nothing is known."""
        if w.row >= 0 and self.start[w.row] is not None:
            return self.new_end[w.row], self.end[w.row]
        if w.stream == links.ALL and self.done_new:
            return max(self.done_new.values()), max(self.done_old.values())
        if w.stream in self.done_new:
            return self.done_new[w.stream], self.done_old[w.stream]
        return None

    def wait(self, w: links.SyncWait) -> None:
        """New end of blocking call ``w``: a new CPU map breakpoint."""
        ts, te = self.call_ts[w.call], self.call_end[w.call]  # host clock
        ts0, te0 = self.call_ts0[w.call], self.call_end0[w.call]  # origin: what the GPU had done by then
        self._advance(te0)
        ws = max(ts, self.b_te[-1]) if self.b_te else ts
        shift = self.b_shift[-1] if self.b_shift else 0
        new_start = ts + shift
        end = new_start + (te - ts)
        awaited = self._awaited(w)
        if awaited is not None:
            aw_new, aw_old = awaited
            wait_old = min(max(aw_old - ts0, 0), te0 - ts0)
            end = max(new_start + max((te - ts) - wait_old, 0), aw_new + te0 - max(ts0, aw_old))
        end = max(end, ws + shift)  # overlapping waits (two threads): keep the CPU map monotone
        self.b_ws.append(ws)
        self.b_te.append(te)
        self.b_new.append(end)
        self.b_shift.append(end - te)

    def breaks(self) -> Breaks:
        return Breaks(np.array(self.b_ws, dtype=np.int64), np.array(self.b_te, dtype=np.int64),
                      np.array(self.b_new, dtype=np.int64))


def _run(trace: Any, dur_new: np.ndarray, code: np.ndarray, order: np.ndarray, lat: np.ndarray, gap: np.ndarray,
         dep_gap: np.ndarray, waits: list[links.SyncWait], deps: dict[int, list[int]],
         clock: CpuClock, end_floor: np.ndarray | None = None) -> tuple[np.ndarray, Breaks]:
    """GPU rows in origin start order; a wait is applied before the first GPU row that starts after
    it ends (on equal times the GPU row first: the wait may have awaited it)."""
    run = _Pass(trace, dur_new, code, lat, gap, dep_gap, deps, clock, end_floor)
    waits = sorted(waits, key=lambda w: (run.call_end0[w.call], w.call))
    w_i = 0
    for r in order.tolist():
        while w_i < len(waits) and run.call_end0[waits[w_i].call] < run.ts[r]:
            run.wait(waits[w_i])
            w_i += 1
        run.place(r)
    for w in waits[w_i:]:
        run.wait(w)
    return np.array(run.start, dtype=np.int64), run.breaks()

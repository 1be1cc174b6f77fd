"""Lay out GPU events on the target and the CPU waits they cause: one pass in origin time order.

A GPU event starts at the latest of (issue 4):
- its launch call's new end + its launch latency: the origin's ``start - launch end`` when the stream
  was idle at launch (negative when the call returned after the kernel started: kept, so that identity
  reproduces the input; never before the call's start); when it was queued behind earlier work (the
  launch ended before the earlier events on the stream ended) the observed delay is queueing, so the
  latency is the smaller of it and the trace's median idle-stream latency. Kernels of one launch
  (CUDA graphs) share the first one's;
- the latest new end of the earlier events on its stream + the origin gap when it was queued (the
  GPU's own kernel-switch gap, measured from the later of its stream's end and the end of the work it
  waited for: a wait on another stream is not a gap of its own; a row with no known dependency is
  queued only behind the row before it in time: _launch_latency), or minus the origin overlap only
  (Hopper PDL overlaps are kept, none added); never before the previous event's new start;
- the new end of the GPU work a cudaStreamWaitEvent made it wait for (links.py), when the origin
  honoured that dependency (a wait on a collective linked to work that had not ended when the row
  started is bound to the collective the origin shows it awaited: _dependencies), + the origin gap after
  the later of that work and its stream; a kernel without a launch and without a predecessor keeps its start.
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

from habitat_trace.ingest import classify as K
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import derived
from habitat_trace.timeline import links
from habitat_trace.timeline.cpuclock import CpuClock, Deprofiled


@dataclass(frozen=True)
class Breaks:
    """CPU map breakpoints, one per blocking call in origin end order (see timeline.replay.cpu_map)."""

    window_start: np.ndarray  # origin start of the wait window (call start, after the previous break)
    end: np.ndarray  # origin end of the blocking call
    new_end: np.ndarray  # its new end


def _launch_latency(trace: Any, code: np.ndarray, order: np.ndarray, dep_end: np.ndarray, reach: np.ndarray,
                    on_stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(latency from launch end, gap to previous event on the stream) per GPU row; ``dep_end`` is the
    origin end of the cross-stream work each row waited for (a wait that outlasted the launch is
    queueing too); ``reach`` and ``on_stream``: _previous_reach, and whether a row has a previous row on its
    stream."""
    gpu, calls = trace.gpu, trace.calls
    ts, end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    launch = gpu[S.LAUNCH].to_numpy()
    has = launch >= 0
    lend = np.where(has, calls[S.END].to_numpy()[np.maximum(launch, 0)] if len(calls) else 0, 0)
    # A row with a known cross-stream dependency is queued behind its own stream's previous row, and its gap follows
    # whichever it waited for last, that row or the awaited work: the wait is not a "gap" of its own stream (DDP's
    # bucket copies waited 4-6 ms for all-reduces that waited for a slower peer). A row without one counts as queued
    # only behind the row before it in time on its stream: where the GPU ran another stream's work in between, the
    # row may have waited for it through an event no link names (cuDNN's RNNs fork and join a dozen streams), so it
    # keeps its latency from its launch instead, as a row first on its stream does (GNMT on 64 SMs: 2.6% / -1.1% this
    # way, 9.9% / +29.7% with every row queued behind its own stream).
    known = dep_end > np.iinfo(np.int64).min
    has_prev = np.where(known, on_stream, _previous_in_time(code, order) >= 0)
    prev_end = np.maximum(reach, dep_end)
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


def _previous_in_time(code: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The row before each row in time where it is on the same stream, S.NONE where the GPU ran another stream's work
    in between."""
    prev = np.full(len(code), S.NONE, dtype=np.int64)
    c = code[order]
    same = np.zeros(len(order), dtype=bool)
    same[1:] = c[1:] == c[:-1]
    prev[order[1:][same[1:]]] = order[:-1][same[1:]]
    return prev


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
    """The row before each row on its own stream (in ``order``), S.NONE for a stream's first."""
    prev = np.full(len(code), S.NONE, dtype=np.int64)
    by_stream = order[np.argsort(code[order], kind="stable")]
    c = code[by_stream]
    same = c[1:] == c[:-1]
    prev[by_stream[1:][same]] = by_stream[:-1][same]
    return prev


@dataclass(frozen=True)
class Layout:
    """What the pass reads of a trace that no replay changes (its durations, host clock and floors do): GPU rows in
    origin start order with their stream, launch, latencies, gaps and dependencies, the blocking calls in origin
    end order with what each awaits. Built once per trace (Tables.derived) and shared by every replay; arrays (a
    pass makes its lists: Python ints cost 4x the memory)."""

    order: np.ndarray  # GPU rows in origin start order
    code: np.ndarray  # per GPU row: stream code
    streams: int
    ts: np.ndarray  # per GPU row: origin start and end
    end: np.ndarray
    launch: np.ndarray  # per GPU row: launch call row, < 0 without one
    lat: np.ndarray
    gap: np.ndarray
    dep_gap: np.ndarray
    deps: dict[int, list[int]]
    waits: list[links.SyncWait]  # blocking calls, by (origin end, call)
    wait_end: list[int]  # their origin ends
    wait_origin: dict[int, tuple[int, int]]  # blocking call -> its origin start and end
    call_ts_ns: np.ndarray  # per call: origin start and end
    call_end_ns: np.ndarray
    by_end: np.ndarray  # GPU rows by (origin end, row)
    launch_rows: np.ndarray  # GPU rows with a launch call, their call, latency and blocking calls applied before
    launch_call: np.ndarray
    launch_lat: np.ndarray
    launch_applied: np.ndarray
    launch_end: Deprofiled  # the launch calls' origin ends
    wait_times: Deprofiled  # the blocking calls' origin starts, then their ends (``waits`` order)


def layout(trace: Any) -> Layout:
    """The trace's Layout (module doc: the latencies, gaps and dependencies are origin facts)."""
    gpu, calls = trace.gpu, trace.calls
    code, codes = links.stream_codes(gpu)
    ts = gpu[S.TS].to_numpy()
    order = np.lexsort((np.arange(len(gpu)), ts))
    linker = links.Linker(trace, code, codes)
    blocking, own = links.blocking_calls(trace)
    waits = [linker.sync_wait(int(c), str(calls[S.SYNC_KIND].iat[c]), own) for c in blocking]
    end = gpu[S.END].to_numpy()
    reach = _previous_reach(code, order, end)
    deps = _dependencies(trace, linker, code, reach)
    dep_end = np.full(len(gpu), np.iinfo(np.int64).min, dtype=np.int64)
    for row, awaited in deps.items():
        dep_end[row] = max(int(end[a]) for a in awaited)
    lat, gap = _launch_latency(trace, code, order, dep_end, reach, _previous_on_stream(code, order) >= 0)
    # a kernel that waited on another stream follows that work by the origin's gap (identity stays exact), measured
    # from its stream's end where the row was queued behind its stream after the awaited work had ended (the time
    # between is queueing, not the dependency's; a stream's first row has reach 0)
    launch = gpu[S.LAUNCH].to_numpy()
    lend = np.where(launch >= 0, calls[S.END].to_numpy()[np.maximum(launch, 0)] if len(calls) else 0, 0)
    dep_gap = np.where((dep_end > np.iinfo(np.int64).min) & ((launch < 0) | (lend <= dep_end)),
                       ts - np.maximum(dep_end, reach), 0)
    call_ts, call_end = calls[S.TS].to_numpy(), calls[S.END].to_numpy()
    waits = sorted(waits, key=lambda w: (int(call_end[w.call]), w.call))
    wait_origin = {w.call: (int(call_ts[w.call]), int(call_end[w.call])) for w in waits}
    wait_end = [wait_origin[w.call][1] for w in waits]
    rows = np.flatnonzero(launch >= 0)
    # _run applies a blocking call before the first row that starts after it ends
    applied = np.searchsorted(np.array(wait_end, dtype=np.int64), ts[rows], side="left")
    return Layout(order, code, len(codes), ts, end, launch, lat, gap, dep_gap, deps, waits, wait_end, wait_origin,
                  call_ts, call_end, np.lexsort((np.arange(len(gpu)), end)), rows, launch[rows], lat[rows], applied,
                  Deprofiled(call_end[launch[rows]] if len(calls) else np.zeros(0, dtype=np.int64)),
                  Deprofiled(np.array([wait_origin[w.call][i] for i in (0, 1) for w in waits], dtype=np.int64)))


def schedule(trace: Any, dur_new: np.ndarray, clock: CpuClock | None = None,
             end_floor: np.ndarray | None = None) -> tuple[np.ndarray, Breaks]:
    """New start (ns) of every GPU row and the CPU breakpoints (on ``clock``'s time: CpuClock.identity() when
    None); ``end_floor``: per GPU row, a new end it cannot end before (a collective held until the last rank has
    joined, timeline/joint.py; NO_FLOOR where none): the row lasts max(its duration, floor - its new start)."""
    lay, passes = derived(trace, layout), derived(trace, Passes)
    clock = clock or CpuClock.identity()
    dur = np.asarray(dur_new, dtype=np.int64)
    for ref in passes.like(dur, end_floor):
        carried = _carry(lay, ref, clock)
        if carried is not None:
            return carried
    start, breaks, ref = _run(lay, dur, clock, end_floor)
    passes.add(ref)
    return start, breaks


def _dependencies(trace: Any, linker: links.Linker, code: np.ndarray, reach: np.ndarray) -> dict[int, list[int]]:
    """delayed row -> the rows its cudaStreamWaitEvents awaited, only dependencies the origin honoured. Where the
    linked record had not ended when the delayed row started, and the wait was on a collective (links.py binds a
    wait to the thread's latest record, but c10d's Work records one event per collective as it launches it and is
    waited on later: DDP's reducer waits on every bucket's all-reduce at the end of backward), the wait is bound to
    what the origin shows it awaited: the latest collective kernel on another stream, launched by the waiting thread
    before the wait, that ended after the delayed row's stream had drained and before the row started. Other unlinked
    waits (cuDNN's) are left out: nothing says which of the work then ending they awaited."""
    calls, gpu = trace.calls, trace.gpu
    ts, end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    deps: dict[int, list[int]] = {}
    late = []
    for call in np.flatnonzero((calls[S.SYNC_KIND] == "wait_event").to_numpy()):
        delayed, awaited = linker.wait_dependency(int(call))
        if delayed == S.NONE:
            continue
        if end[awaited] <= ts[delayed]:
            deps.setdefault(delayed, []).append(awaited)
        else:
            late.append((int(call), delayed))
    if not late:
        return deps
    launch = gpu[S.LAUNCH].to_numpy()
    has = launch >= 0
    thread = np.where(has, calls[S.TID].to_numpy()[np.maximum(launch, 0)], -1)
    launched = np.where(has, calls[S.TS].to_numpy()[np.maximum(launch, 0)], np.iinfo(np.int64).max)
    by_end = np.argsort(end, kind="stable")
    ends = end[by_end]
    call_tid, call_ts = calls[S.TID].to_numpy(), calls[S.TS].to_numpy()
    collective = (gpu[S.KCLASS] == K.NCCL).to_numpy()
    for waiter, row in late:
        lo = np.searchsorted(ends, reach[row], side="right")
        hi = np.searchsorted(ends, ts[row], side="right")
        cand = by_end[lo:hi]
        cand = cand[(thread[cand] == call_tid[waiter]) & (launched[cand] < call_ts[waiter]) & (code[cand] != code[row])
                    & collective[cand]]
        if len(cand):
            deps.setdefault(row, []).append(int(cand[-1]))
    return deps


NO_FLOOR = np.iinfo(np.int64).min  # end_floor's "no floor"
_NEVER = -(1 << 62)  # the earliest start of a launched row that is first on its stream


class _Pass:
    """State of the one pass: the layout's lists, new GPU times so far, per-stream progress, and the CPU
    breakpoints. ``_run`` places the GPU rows itself (the hot loop); this applies the blocking calls between them."""

    def __init__(self, lay: Layout, clock: CpuClock) -> None:
        self.lay = lay
        self.code, self.ts, self.launch = lay.code.tolist(), lay.ts.tolist(), lay.launch.tolist()
        self.lat, self.gap, self.dep_gap = lay.lat.tolist(), lay.gap.tolist(), lay.dep_gap.tolist()
        if clock.is_identity:
            self.call_ts, self.call_end = lay.call_ts_ns.tolist(), lay.call_end_ns.tolist()
        else:  # on the target host's clock
            self.call_ts, self.call_end = clock(lay.call_ts_ns).tolist(), clock(lay.call_end_ns).tolist()
        n = len(lay.ts)
        self.start: list[int | None] = [None] * n
        self.new_end = [0] * n
        self.by_end = lay.by_end.tolist()
        self.by_end_end = lay.end[lay.by_end].tolist()
        self.done_i = 0
        self.done_new: list[int | None] = [None] * lay.streams  # per stream: max new end of rows that ended (origin)
        self.done_old: list[int | None] = [None] * lay.streams
        self.any_done = False
        self.b_ws: list[int] = []
        self.b_te: list[int] = []
        self.b_new: list[int] = []
        self.b_shift: list[int] = []
        self.awaited: list[tuple[int, int] | None] = []  # per blocking call applied: what it awaited

    def _advance(self, t: int) -> None:
        """Mark rows whose origin end is <= t as done (what a wait ending at t could have awaited)."""
        i = self.done_i
        by_end, by_end_end, code, new_end = self.by_end, self.by_end_end, self.code, self.new_end
        done_new, done_old = self.done_new, self.done_old
        while i < len(by_end) and by_end_end[i] <= t:
            r = by_end[i]
            c, ne, oe = code[r], new_end[r], by_end_end[i]
            if done_new[c] is None or ne > done_new[c]:
                done_new[c] = ne
            if done_old[c] is None or oe > done_old[c]:
                done_old[c] = oe
            self.any_done = True
            i += 1
        self.done_i = i

    def _awaited(self, w: links.SyncWait) -> tuple[int, int] | None:
        """(new end, origin end) of the GPU work ``w`` waits for, None when nothing is known."""
        if w.row >= 0 and self.start[w.row] is not None:
            return self.new_end[w.row], int(self.lay.end[w.row])
        if w.stream == links.ALL and self.any_done:
            return (max(v for v in self.done_new if v is not None),
                    max(v for v in self.done_old if v is not None))
        if w.stream >= 0 and self.done_new[w.stream] is not None:
            return self.done_new[w.stream], self.done_old[w.stream]  # type: ignore[return-value]
        return None

    def wait(self, w: links.SyncWait) -> None:
        """New end of blocking call ``w``: a new CPU map breakpoint."""
        self._advance(self.lay.wait_origin[w.call][1])
        awaited = self._awaited(w)
        self.awaited.append(awaited)
        _break(self, w.call, awaited)

    def breaks(self) -> Breaks:
        return Breaks(np.array(self.b_ws, dtype=np.int64), np.array(self.b_te, dtype=np.int64),
                      np.array(self.b_new, dtype=np.int64))


def _break(b: Any, call: int, awaited: tuple[int, int] | None) -> None:
    """Append blocking call ``call``'s breakpoint to ``b`` (b_ws, b_te, b_new, b_shift; call_ts, call_end on the host
    clock; lay): it ends at its new start + its pure CPU time, or when the awaited GPU work (new end, origin end) ends
    + the origin's return latency."""
    ts, te = b.call_ts[call], b.call_end[call]  # host clock
    ts0, te0 = b.lay.wait_origin[call]  # origin: what the GPU had done by then
    ws = max(ts, b.b_te[-1]) if b.b_te else ts
    shift = b.b_shift[-1] if b.b_shift else 0
    new_start = ts + shift
    end = new_start + (te - ts)
    if awaited is not None:
        aw_new, aw_old = awaited
        wait_old = min(max(aw_old - ts0, 0), te0 - ts0)
        end = max(new_start + max((te - ts) - wait_old, 0), aw_new + te0 - max(ts0, aw_old))
    end = max(end, ws + shift)  # overlapping waits (two threads): keep the CPU map monotone
    b.b_ws.append(ws)
    b.b_te.append(te)
    b.b_new.append(end)
    b.b_shift.append(end - te)


@dataclass(frozen=True)
class Reference:
    """A full pass: its durations and floors, the GPU starts, each row's start before its launch counted (its stream
    and dependencies; _NEVER for a launched row first on its stream) and what each blocking call awaited."""

    dur: np.ndarray
    end_floor: np.ndarray | None
    start: np.ndarray
    other: np.ndarray
    awaited: list[tuple[int, int] | None]


class Passes:
    """The last MAX_REFERENCES full passes of a trace (Tables.derived). A replay on another host clock (the band's
    ends, a launch-queue round) usually moves launches without moving the GPU: ``_carry`` proves that it does not
    and then skips the pass."""

    MAX_REFERENCES = 4  # a target's central, fast and slow clocks, and the origin's

    def __init__(self, trace: Any) -> None:
        self.refs: list[Reference] = []

    def like(self, dur: np.ndarray, end_floor: np.ndarray | None) -> list[Reference]:
        """The passes run with these durations and floors, latest first."""
        return [r for r in reversed(self.refs) if np.array_equal(r.dur, dur) and
                (r.end_floor is None if end_floor is None else
                 r.end_floor is not None and np.array_equal(r.end_floor, end_floor))]

    def add(self, ref: Reference) -> None:
        self.refs = (self.refs + [ref])[-self.MAX_REFERENCES:]


class _Carried:
    """The breakpoints of a pass on a new host clock whose GPU rows start as in a reference pass (_break's state: the
    blocking calls' times on that clock)."""

    def __init__(self, lay: Layout, clock: CpuClock) -> None:
        self.lay = lay
        calls, times = [w.call for w in lay.waits], lay.wait_times.on(clock).tolist()
        self.call_ts, self.call_end = dict(zip(calls, times[:len(calls)])), dict(zip(calls, times[len(calls):]))
        self.b_ws: list[int] = []
        self.b_te: list[int] = []
        self.b_new: list[int] = []
        self.b_shift: list[int] = []


def _carry(lay: Layout, ref: Reference, clock: CpuClock) -> tuple[np.ndarray, Breaks] | None:
    """The pass on ``clock`` when every GPU row starts as in ``ref`` (None when one does not). By induction over the
    rows in pass order: while the rows before a row start as in ``ref``, its stream and dependency terms are ref's
    (``other``), every blocking call applied before it awaited what it awaited in ``ref`` (so its breakpoint on this
    clock follows from _break), hence its launch term is known; if max(other, launch term) is ref's start for every
    row, the pass would place every row as ``ref`` did, and its breakpoints are these."""
    b = _Carried(lay, clock)
    for w, awaited in zip(lay.waits, ref.awaited):
        _break(b, w.call, awaited)
    start = ref.other.copy()
    if len(lay.launch_rows):
        le = lay.launch_end.on(clock)
        b_te, b_shift = np.array(b.b_te, dtype=np.int64), np.array(b.b_shift, dtype=np.int64)
        k = np.minimum(np.searchsorted(b_te, le, side="right"), lay.launch_applied)
        shift = np.where(k > 0, b_shift[np.maximum(k - 1, 0)] if len(b_shift) else 0, 0)
        start[lay.launch_rows] = np.maximum(start[lay.launch_rows], le + shift + lay.launch_lat)
    if not np.array_equal(start, ref.start):
        return None
    return start, Breaks(np.array(b.b_ws, dtype=np.int64), np.array(b.b_te, dtype=np.int64),
                         np.array(b.b_new, dtype=np.int64))


def _run(lay: Layout, dur_new: np.ndarray, clock: CpuClock,
         end_floor: np.ndarray | None = None) -> tuple[np.ndarray, Breaks, Reference]:
    """GPU rows in origin start order; a wait is applied before the first GPU row that starts after it ends (on
    equal times the GPU row first: the wait may have awaited it). A row starts at the latest of its stream's
    progress (the previous start; the stream's latest end + the row's gap), its launch call's new end + its latency
    and the new ends of the work it depends on (+ its dependency gap); a row first on its stream keeps its start
    when nothing launched it. It ends at start + duration, or at its floor when that is later."""
    run = _Pass(lay, clock)
    dur = dur_new.tolist()
    held = np.flatnonzero(end_floor > NO_FLOOR) if end_floor is not None else np.zeros(0, dtype=np.int64)
    floor = dict(zip(held.tolist(), np.asarray(end_floor)[held].tolist())) if len(held) else {}
    code, launch, ts, lat, gap, dep_gap = run.code, run.launch, run.ts, run.lat, run.gap, run.dep_gap
    deps, waits, wait_end = lay.deps, lay.waits, lay.wait_end
    start, new_end, call_end = run.start, run.new_end, run.call_end
    b_te, b_shift = run.b_te, run.b_shift
    seen = [False] * lay.streams
    last_start, last_end = [0] * lay.streams, [0] * lay.streams
    other = [0] * len(ts)
    w_i, n_waits = 0, len(waits)
    for r in lay.order.tolist():
        while w_i < n_waits and wait_end[w_i] < ts[r]:
            run.wait(waits[w_i])
            w_i += 1
        c, call = code[r], launch[r]
        if seen[c]:
            lo = last_start[c]
            x = last_end[c] + gap[r]
            if x > lo:
                lo = x
        else:  # first on its stream: a kernel queued before the window keeps its start
            lo = ts[r] if call < 0 else _NEVER
        if r in deps:
            for a in deps[r]:
                if start[a] is not None:
                    x = new_end[a] + dep_gap[r]
                    if x > lo:
                        lo = x
        other[r] = lo
        if call >= 0:
            le = call_end[call]
            k = bisect_right(b_te, le) if b_te else 0
            x = le + (b_shift[k - 1] if k else 0) + lat[r]
            if x > lo:
                lo = x
        end = lo + dur[r]
        if floor and r in floor and floor[r] > end:
            end = floor[r]
        start[r], new_end[r] = lo, end
        last_start[c] = lo
        if not seen[c]:
            seen[c], last_end[c] = True, max(lo, end)
        elif end > last_end[c]:
            last_end[c] = end
    for w in waits[w_i:]:
        run.wait(w)
    starts = np.array(start, dtype=np.int64)
    # copies: callers change their duration and floor arrays between passes (joint._settle)
    floors = None if end_floor is None else np.array(end_floor, dtype=np.int64)
    return starts, run.breaks(), Reference(dur_new.copy(), floors, starts.copy(), np.array(other, dtype=np.int64),
                                           run.awaited)

"""``replay(trace, prediction) -> Timeline``: new int64 ns times for every timed event of the trace.

GPU events are laid out by schedule.py. Every CPU-side time (ops, runtime calls, python functions,
ProfilerStep spans, memory instants, flows on CPU threads, cuda_sync records) is read on the target host's
clock (cpuclock.CpuClock: profiler overhead removed, what-if host speed; the identity by default) and then
goes through one monotone CPU map: the shift accumulated at the blocking calls before it (shared by all threads: the
autograd and other threads move with the main thread's shift at the same moment, the simplest rule
that keeps causality for threads started or joined by the main thread), squeezed inside a wait window
(min(t + shift, the wait's new end)). A monotone map keeps every thread's order and nesting: an op
that contains a blocking call stretches or shrinks by the call's change. Flows on GPU tracks move with
their GPU event; gpu_user_annotation spans cover their kernels' new span.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest import tables
from habitat_trace.ingest.trace import derived
from habitat_trace.scale.prediction import Prediction
from habitat_trace.timeline.cpuclock import CpuClock, Deprofiled
from habitat_trace.timeline.schedule import Breaks, Passes, layout, schedule

NO_TIME = tables.NO_TIME  # the event has no ts (metadata, non-dict) or no dur (not an X event)


@dataclass(frozen=True)
class Timeline:
    """Old and new times in ns, aligned with ``trace.events`` (NO_TIME where absent)."""

    ts_ns: np.ndarray
    dur_ns: np.ndarray
    old_ts_ns: np.ndarray
    old_dur_ns: np.ndarray
    gpu_start_ns: np.ndarray  # per trace.gpu row
    gpu_end_ns: np.ndarray
    breaks: Breaks


def cpu_map(t: np.ndarray, breaks: Breaks) -> np.ndarray:
    """New time of CPU-side origin times ``t`` (monotone non-decreasing in t)."""
    t = np.asarray(t, dtype=np.int64)
    if len(breaks.end) == 0:
        return t.copy()
    shift = np.concatenate(([0], breaks.new_end - breaks.end))
    k = np.searchsorted(breaks.end, t, side="right")
    out = t + shift[k]
    nxt = np.minimum(k, len(breaks.end) - 1)
    inside = (k < len(breaks.end)) & (t >= breaks.window_start[nxt])
    out[inside] = np.minimum(out[inside], breaks.new_end[nxt[inside]])
    return out


def replay(trace: Any, prediction: Prediction, clock: CpuClock | None = None) -> Timeline:
    """The target timeline; CPU times run on ``clock`` (the target host's, cpuclock.py; None: the origin's)."""
    clock = clock or CpuClock.identity()
    fixed = derived(trace, _fixed)
    dur_new = np.asarray(prediction.dur_ns, dtype=np.int64)
    start, breaks = schedule(trace, dur_new, clock)
    end = start + dur_new
    old_ts, old_dur = trace.event_ts_ns, trace.event_dur_ns
    ts = np.full(len(old_ts), NO_TIME, dtype=np.int64)
    dur = np.full(len(old_ts), NO_TIME, dtype=np.int64)
    ts[fixed.timed] = cpu_map(fixed.timed_ts.on(clock), breaks)
    dur[fixed.has_dur] = cpu_map(fixed.dur_end.on(clock), breaks) - ts[fixed.has_dur]
    ts[fixed.gpu_event], dur[fixed.gpu_event] = start, dur_new
    annotations, f = derived(trace, _moves)
    for a in annotations:
        if old_ts[a.event] != NO_TIME:  # (a times_view keeps no annotation)
            ts[a.event], dur[a.event] = a.span(start, end)
    ts[f.event] = np.minimum(start[f.row] + f.offset, end[f.row])
    return Timeline(ts, dur, old_ts, old_dur, start, end, breaks)


def times_view(trace: Any, events: np.ndarray) -> Any:
    """``trace`` (Tables) keeping the CPU times of ``events`` only: its replay maps those alone, each to the time a
    replay of ``trace`` gives it (a CPU time's new time depends on the GPU rows and the blocking calls, which the view
    keeps, not on the other events). The band's ends read the runtime calls' and the steps' times, a quarter of a
    trace's events. Shares ``trace``'s layout and passes (schedule reads no event time)."""
    keep = np.zeros(len(trace.event_ts_ns), dtype=bool)
    keep[events] = True
    return trace.with_times(np.where(keep, trace.event_ts_ns, NO_TIME), np.where(keep, trace.event_dur_ns, NO_TIME),
                            (layout, Passes, _moves))


@dataclass(frozen=True)
class _Annotation:
    """A gpu_user_annotation and the GPU rows that started inside it on its track (``rows``, in origin start order),
    with the neighbours before and after them (-1: none) and the origin's margins and gaps."""

    event: int
    rows: np.ndarray
    before: int
    after: int
    margin0: int  # origin: first row's start - the annotation's start
    margin1: int  # origin: the annotation's end - the rows' latest end
    gap0: int  # origin: first row's start - the previous row's end (unused without one)
    gap1: int  # origin: the next row's start - the rows' latest end

    def span(self, start: np.ndarray, end: np.ndarray) -> tuple[int, int]:
        """(ts, dur) on the target: the rows' new extent, with the origin's margins around it, shrunk in proportion
        where the gap to the neighbouring GPU event shrank (so annotations that did not cross in the origin do not)."""
        first_new, last_new = int(start[self.rows].min()), int(end[self.rows].max())
        before = (last_new - first_new, 0) if self.before < 0 else (self.gap0, first_new - int(end[self.before]))
        after = (0, 0) if self.after < 0 else (self.gap1, int(start[self.after]) - last_new)
        new0 = first_new - _margin(self.margin0, *before, open_end=self.before < 0)
        new1 = last_new + _margin(self.margin1, *after, open_end=self.after < 0)
        return new0, new1 - new0


@dataclass(frozen=True)
class _Flows:
    """Flow events inside a GPU row of their track: the row each moves with and its offset into it (it stays inside
    the row's new span)."""

    event: np.ndarray
    row: np.ndarray
    offset: np.ndarray


@dataclass(frozen=True)
class _Fixed:
    """What replay reads of a trace that no replay changes (built once per trace: Tables.derived)."""

    timed: np.ndarray  # events with a ts, and their ts
    timed_ts: Deprofiled
    has_dur: np.ndarray  # events with a dur, and their origin end
    dur_end: Deprofiled
    gpu_event: np.ndarray


def _fixed(trace: Any) -> _Fixed:
    old_ts, old_dur = trace.event_ts_ns, trace.event_dur_ns
    timed = np.flatnonzero(old_ts != NO_TIME)
    has_dur = np.flatnonzero(old_dur != NO_TIME)
    return _Fixed(timed, Deprofiled(old_ts[timed]), has_dur, Deprofiled(old_ts[has_dur] + old_dur[has_dur]),
                  trace.gpu[S.EVENT].to_numpy())


def _moves(trace: Any) -> tuple[list[_Annotation], _Flows]:
    """The events that move with the GPU rows: gpu_user_annotations and flows on GPU tracks (from the tables alone,
    not the event times: times_view shares them)."""
    return _annotations(trace), _gpu_flows(trace)


def _tracks(df: Any) -> tuple[np.ndarray, list[str]]:
    """Track code per row and the tracks ("pid:tid", as a string: equal strings are one track), stringified once
    per distinct (pid, tid)."""
    pid, pids = pd.factorize(df[S.PID].to_numpy(dtype=object))
    tid, tids = pd.factorize(df[S.TID].to_numpy(dtype=object))
    pair, pairs = pd.factorize(pid.astype(np.int64) * max(len(tids), 1) + tid)
    names = [f"{pids[k // max(len(tids), 1)]}:{tids[k % max(len(tids), 1)]}" for k in pairs.tolist()]
    same, tracks = pd.factorize(np.array(names, dtype=object)) if names else (np.zeros(0, dtype=np.int64), [])
    return np.asarray(same)[pair] if len(pair) else pair, [str(t) for t in tracks]


def _annotations(trace: Any) -> list[_Annotation]:
    """Each gpu_user_annotation (one per stream track) and the GPU events that started inside it on its track."""
    ann, gpu = trace.gpu_annotations, trace.gpu
    if len(ann) == 0:
        return []
    gcode, gtracks = _tracks(gpu)
    acode, atracks = _tracks(ann)
    by_track = {t: np.flatnonzero(gcode == k) for k, t in enumerate(gtracks)}
    old_start, old_end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    out = []
    for key in sorted(set(atracks)):
        rows = by_track.get(key, np.zeros(0, dtype=np.int64))
        rows = rows[np.argsort(old_start[rows], kind="stable")]
        sel = ann[acode == atracks.index(key)]
        a_ts, a_end = sel[S.TS].to_numpy(), (sel[S.TS] + sel[S.DUR]).to_numpy()
        lo = np.searchsorted(old_start[rows], a_ts, side="left")
        hi = np.searchsorted(old_start[rows], a_end, side="left")
        for ev, t0, t1, a, b in zip(sel[S.EVENT].tolist(), a_ts.tolist(), a_end.tolist(), lo.tolist(), hi.tolist()):
            if b <= a:
                continue
            inside = rows[a:b]
            first_old, last_old = int(old_start[inside].min()), int(old_end[inside].max())
            before, after = (int(rows[a - 1]) if a else -1), (int(rows[b]) if b < len(rows) else -1)
            gap0 = first_old - int(old_end[before]) if before >= 0 else 0
            gap1 = int(old_start[after]) - last_old if after >= 0 else 0
            out.append(_Annotation(ev, inside, before, after, first_old - t0, t1 - last_old, gap0, gap1))
    return out
def _margin(margin: int, old_gap: int, new_gap: int, open_end: bool) -> int:
    """The origin's margin, scaled down by new_gap / old_gap when the gap to the neighbour shrank."""
    margin = max(margin, 0)
    if open_end or new_gap >= old_gap:
        return margin
    return margin * max(new_gap, 0) // old_gap if old_gap > 0 else 0


def _gpu_flows(trace: Any) -> _Flows:
    """Flow events inside a GPU event of their track keep their offset into it; every other flow keeps its CPU-mapped
    time (replay)."""
    flows, gpu = trace.flows, trace.gpu
    parts: list[tuple[np.ndarray, ...]] = []
    if len(flows) and len(gpu):
        gcode, gtracks = _tracks(gpu)
        fcode, ftracks = _tracks(flows)
        old, old_end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
        fts_all, fev = flows[S.TS].to_numpy(), flows[S.EVENT].to_numpy()
        gindex = {t: k for k, t in enumerate(gtracks)}
        for key in sorted(set(ftracks) & set(gtracks)):
            rows = np.flatnonzero(gcode == gindex[key])
            rows = rows[np.argsort(old[rows], kind="stable")]
            fsel = np.flatnonzero(fcode == ftracks.index(key))
            fts = fts_all[fsel]
            pos = np.searchsorted(old[rows], fts, side="right") - 1
            r = rows[np.maximum(pos, 0)]
            # between two GPU events of the track (inside an event ingest dropped, e.g. a kernel without "cat") or
            # before its first: the CPU map, the one that event's own times take, so a flow bound to it stays inside
            # it (issue 33's fuzz: moved with the GPU event before it, the flow left the slice it was bound to)
            inside = (pos >= 0) & (fts <= old_end[r])
            parts.append((fev[fsel][inside], r[inside], (fts - old[r])[inside]))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return _Flows(empty, empty, empty)
    return _Flows(*(np.concatenate(c) for c in zip(*parts)))

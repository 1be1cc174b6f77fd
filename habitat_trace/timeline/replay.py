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

from habitat_trace.ingest import schema as S
from habitat_trace.ingest import tables
from habitat_trace.scale.prediction import Prediction
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.schedule import Breaks, schedule

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
    dur_new = np.asarray(prediction.dur_ns, dtype=np.int64)
    start, breaks = schedule(trace, dur_new, clock)
    end = start + dur_new
    old_ts, old_dur = trace.event_ts_ns, trace.event_dur_ns
    timed = old_ts != NO_TIME
    has_dur = old_dur != NO_TIME
    ts = np.full(len(old_ts), NO_TIME, dtype=np.int64)
    dur = np.full(len(old_ts), NO_TIME, dtype=np.int64)
    ts[timed] = cpu_map(clock(old_ts[timed]), breaks)
    dur[has_dur] = cpu_map(clock(old_ts[has_dur] + old_dur[has_dur]), breaks) - ts[has_dur]
    ev = trace.gpu[S.EVENT].to_numpy()
    ts[ev], dur[ev] = start, dur_new
    _annotations(trace, start, end, ts, dur)
    _gpu_flows(trace, start, end, ts)
    return Timeline(ts, dur, old_ts, old_dur, start, end, breaks)


def _annotations(trace: Any, start: np.ndarray, end: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> None:
    """A gpu_user_annotation (one per stream track) spans the new extent of the GPU events that started
    inside it on its track, with the origin's margins around them, shrunk in proportion where the gap
    to the neighbouring GPU event shrank (so annotations that did not cross in the origin do not)."""
    ann, gpu = trace.gpu_annotations, trace.gpu
    if len(ann) == 0:
        return
    track = (gpu[S.PID] + ":" + gpu[S.TID]).to_numpy()
    atrack = (ann[S.PID] + ":" + ann[S.TID]).to_numpy()
    old_start, old_end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    for key in np.unique(atrack):
        rows = np.flatnonzero(track == key)
        rows = rows[np.argsort(old_start[rows], kind="stable")]
        sel = ann[atrack == key]
        a_ts, a_end = sel[S.TS].to_numpy(), (sel[S.TS] + sel[S.DUR]).to_numpy()
        lo = np.searchsorted(old_start[rows], a_ts, side="left")
        hi = np.searchsorted(old_start[rows], a_end, side="left")
        for ev, t0, t1, a, b in zip(sel[S.EVENT].tolist(), a_ts.tolist(), a_end.tolist(), lo.tolist(), hi.tolist()):
            if b <= a:
                continue
            inside = rows[a:b]
            first_old, last_old = int(old_start[inside].min()), int(old_end[inside].max())
            first_new, last_new = int(start[inside].min()), int(end[inside].max())
            before = (last_new - first_new, 0) if a == 0 else \
                (first_old - int(old_end[rows[a - 1]]), first_new - int(end[rows[a - 1]]))
            after = (0, 0) if b == len(rows) else (int(old_start[rows[b]]) - last_old, int(start[rows[b]]) - last_new)
            new0 = first_new - _margin(first_old - t0, *before, open_end=a == 0)
            new1 = last_new + _margin(t1 - last_old, *after, open_end=b == len(rows))
            ts[ev], dur[ev] = new0, new1 - new0


def _margin(margin: int, old_gap: int, new_gap: int, open_end: bool) -> int:
    """The origin's margin, scaled down by new_gap / old_gap when the gap to the neighbour shrank."""
    margin = max(margin, 0)
    if open_end or new_gap >= old_gap:
        return margin
    return margin * max(new_gap, 0) // old_gap if old_gap > 0 else 0


def _gpu_flows(trace: Any, start: np.ndarray, end: np.ndarray, ts: np.ndarray) -> None:
    """Flow events on a GPU track keep their offset into the GPU event that contains them."""
    flows, gpu = trace.flows, trace.gpu
    if len(flows) == 0 or len(gpu) == 0:
        return
    track = (gpu[S.PID] + ":" + gpu[S.TID]).to_numpy()
    ftrack = (flows[S.PID] + ":" + flows[S.TID]).to_numpy()
    old = gpu[S.TS].to_numpy()
    for key in np.intersect1d(np.unique(ftrack), np.unique(track)):
        rows = np.flatnonzero(track == key)
        rows = rows[np.argsort(old[rows], kind="stable")]
        fsel = np.flatnonzero(ftrack == key)
        fts = flows[S.TS].to_numpy()[fsel]
        pos = np.searchsorted(old[rows], fts, side="right") - 1
        r = rows[np.maximum(pos, 0)]
        inside = (pos >= 0) & (fts <= gpu[S.END].to_numpy()[r])
        new = np.minimum(start[r] + (fts - old[r]), end[r])
        # between two GPU events of the track (an event ingest dropped, a user annotation): move with the GPU event
        # before it, whose timeline it is on (the CPU map moves CPU time, which no longer runs in step with it)
        after = (pos >= 0) & ~inside
        new = np.where(after, start[r] + (fts - old[r]), new)
        events = flows[S.EVENT].to_numpy()[fsel]
        ok = inside | after  # the rest come before the track's first GPU event: the CPU map
        ts[events[ok]] = new[ok]

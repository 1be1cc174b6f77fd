"""``joint_replay(traces, predictions) -> JointReplay``: replay the ranks of one distributed step together.

A collective ends on every rank when the last rank has joined plus its transfer. Collectives are matched
across ranks by (process group, ``Seq``) when every rank's trace records ``Seq``, else by their order within
the process group (launch order on each rank: NCCL requires every rank of a group to issue its collectives in
the same order). The transfer of a matched collective is the shortest of its kernel durations over the ranks
(the rank that joined last waited least; measured: its kernel time; predicted: that time x the collective
model's ratio). The end E of a matched collective is the latest start over the ranks + its transfer; each rank
is laid out by ``schedule`` with its collectives held until E (end_floor), and E is recomputed from those starts
until no E changes. E is iterated, not the durations: a duration (E - own start) fixed from the previous pass's
start and applied at this pass's later start ends the collective late by the shift, which pushes the other
ranks' next collectives, whose waits push this rank's back: on FSDP's 2-rank traces the waits grew ~1000x a pass
to an int64 overflow. Starts only grow with E, so E grows from below to the least consistent layout (each pass
settles at least the earliest unsettled collective). A cross-rank cycle (matched collectives in different orders
on the ranks) has no consistent layout: a collective ending past HORIZON_FACTOR x the ranks' span, or MAX_PASSES,
stops it with a warning and the last pass's layout.

``replay_ranks`` adds the launch back-pressure: a launch waits while its stream holds LAUNCH_QUEUE_DEPTH pending
launches (overhead.queue_delay_ns), and the host carries the delay; each round delays every rank's clock by what
the previous joint replay shows. One rank is the same replay without collectives to match: a single trace and a
directory of ranks take this one path.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import derived
from habitat_trace.scale.prediction import Prediction
from habitat_trace.timeline import overhead, summary
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.floors import CUPTI_CALL_MAX_NS
from habitat_trace.timeline.replay import Timeline, replay
from habitat_trace.timeline.schedule import NO_FLOOR

# A launch call blocked on a full queue (recorded_blocks): its own kernel started this long after it returned (the
# queue held at least a millisecond of work: 1,021 launches of 1 us kernels), and it returned within SLOT_NS after a
# kernel of its stream ended (the slot that kernel freed: 3.5-8.6 us median on Lambda's ResNet50 TF32 step, H100)
QUEUE_LAG_NS = 1_000_000
SLOT_NS = 30_000
MAX_PASSES = 50  # a step of 50 collectives whose last rank changes every time; more is a warning
# No consistent layout ends later than running every rank's step one after another (n x the span of one pass
# without waits); a collective that would end past this many times that is in a cross-rank cycle.
HORIZON_FACTOR = 4
# Replays to find the launch back-pressure: each round adds the delays the previous replay shows; three reach the
# fixed point on the shared traces scaled to a T4 (the slowest catalog target: the most queueing).
MAX_QUEUE_ROUNDS = 3
# settle's table of a lone rank: no collective matched (the columns of a match, with zero transfer and wait)
_NO_COLLECTIVES = pd.DataFrame(columns=["rank", "row", "key", "collective"]).assign(transfer_ns=0, wait_ns=0)


@dataclass(frozen=True)
class JointReplay:
    predictions: tuple[Prediction, ...]  # per rank: the collectives' durations include the wait for the others
    timelines: tuple[Timeline, ...]
    collectives: pd.DataFrame  # one row per (rank, matched collective): rank, row, key, transfer_ns, wait_ns
    passes: int
    warnings: tuple[str, ...] = ()
    clocks: tuple[Optional[CpuClock], ...] = ()  # per rank: the host clock replayed on, queue delays included


def match(traces: Sequence[Any]) -> pd.DataFrame:
    """Per rank (position in ``traces``) and NCCL kernel: its row in trace.gpu and the cross-rank key."""
    return match_fields([summary.collectives(t) for t in traces])


def match_fields(fields: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """``match`` from each rank's ``summary.collectives`` (what a RankSummary keeps)."""
    parts = []
    for rank, c in enumerate(fields):
        f = c.drop(columns="start")
        f["rank"] = rank
        # launch order (the host's, which NCCL's same-order rule is about); the GPU start where no launch was seen:
        # collectives on several streams (FSDP's all-gather and reduce-scatter streams) start out of launch order
        f["start"] = c["start"].to_numpy()
        parts.append(f)
    f = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not len(f):
        return f.assign(key=pd.Series(dtype=object))
    use_seq = bool((f["seq"] >= 0).all())
    f = f.sort_values(["rank", "start"], kind="stable")
    order = f.groupby(["rank", "pg"], sort=False).cumcount()
    ident = f["seq"] if use_seq else order
    f["key"] = f["pg"].astype(str) + "#" + ident.astype(str)
    # a key seen on one rank only has no partner in these traces: it keeps its own duration
    ranks = f.groupby("key")["rank"].transform("nunique")
    return f[ranks > 1].reset_index(drop=True)


@dataclass(frozen=True)
class Settled:
    """The joint replay's result on the ranks' summaries: per (rank, matched collective) its transfer and wait
    (``collectives``), the passes it took and its warning, if any."""

    collectives: pd.DataFrame  # rank, row, key, collective, transfer_ns, wait_ns
    passes: int
    warnings: tuple[str, ...]

    def durations(self, rank: int, dur_ns: np.ndarray) -> np.ndarray:
        """Rank ``rank``'s GPU durations ``dur_ns`` with its matched collectives lasting until they end together."""
        c = self.collectives
        out = np.asarray(dur_ns, dtype=np.int64).copy()
        if len(c):
            mine = (c["rank"] == rank).to_numpy()
            out[c["row"].to_numpy()[mine]] = (c["transfer_ns"] + c["wait_ns"]).to_numpy()[mine]
        return out


def settle(summaries: Sequence[summary.RankSummary]) -> Settled:
    """The matched collectives' durations so that they end together on every rank (module doc), from the ranks'
    summaries alone (timeline/summary.py: each rank's layout for given collective durations and floors)."""
    n = len(summaries)
    if n <= 1:  # a copy of one empty table: building it took 0.5 ms, five times a target (scale --to all)
        return Settled(_NO_COLLECTIVES.copy(), 0, ())
    m = match_fields([s.fields for s in summaries])
    if not len(m):
        alone = ("no collective matched across the ranks: each rank replayed on its own",) if n > 1 else ()
        return Settled(m.assign(transfer_ns=0, wait_ns=0), 0, alone)
    rank, row = m["rank"].to_numpy(), m["row"].to_numpy()
    at = np.zeros(len(m), dtype=np.int64)  # each matched kernel's place among its rank's collectives
    for r, s in enumerate(summaries):
        mine = rank == r
        at[mine] = pd.Index(s.rows).get_indexer(row[mine])
    pred_dur = np.array([int(summaries[r].dur_ns[j]) for r, j in zip(rank, at)], dtype=np.int64)
    key_codes, _ = pd.factorize(m["key"])
    transfer = pd.Series(pred_dur).groupby(key_codes).transform("min").to_numpy()
    durs = [s.dur_ns.copy() for s in summaries]
    for r, j, t in zip(rank, at, transfer):
        durs[r][j] = t
    passes, final, note = _settle(summaries, durs, rank, at, key_codes, transfer)
    table = pd.DataFrame({"rank": rank, "row": row, "key": m["key"].to_numpy(), "collective": m["collective"],
                          "transfer_ns": transfer, "wait_ns": final - transfer})
    return Settled(table, passes, (note,) if note else ())


def joint_replay(traces: Sequence[Any], predictions: Sequence[Prediction],
                 clocks: Optional[Sequence[CpuClock]] = None) -> JointReplay:
    """Every rank replayed with its collectives' durations set so that matched collectives end together (module
    doc); ``clocks``: each rank's host clock (pipeline.host_clock: the profiler's overhead removed; None: the
    recorded CPU timelines). The same as ``settle`` on the ranks' summaries, then each rank's replay."""
    cl: list[Optional[CpuClock]] = list(clocks) if clocks is not None else [None] * len(traces)
    several = len(traces) > 1
    s = settle([summary.summarize(t, p.dur_ns, c) for t, p, c in zip(traces, predictions, cl)] if several else [])
    preds = tuple(replace(p, dur_ns=s.durations(r, p.dur_ns)) for r, p in enumerate(predictions)) \
        if len(s.collectives) else tuple(predictions)
    timelines = tuple(replay(t, p, c) for t, p, c in zip(traces, preds, cl))
    return JointReplay(preds, timelines, s.collectives, s.passes, s.warnings, tuple(cl))


def _settle(summaries: Sequence[summary.RankSummary], durs: list[np.ndarray], rank: np.ndarray, at: np.ndarray,
            key: np.ndarray, transfer: np.ndarray) -> tuple[int, np.ndarray, Optional[str]]:
    """(passes, each matched collective's duration, a warning or None): the end times E of the matched collectives
    iterated from below (module doc). A pass lays every rank out with its collectives held until E (schedule's
    end_floor, evaluated on the rank's summary) and sets E = the latest start of each collective over the ranks +
    its transfer; starts only grow with E, so E only grows and the least consistent layout is reached. Matched
    collectives whose order differs between the ranks (a cycle: no consistent layout) would grow E without end: it
    stops at HORIZON_FACTOR x the span of the ranks' first pass, or after MAX_PASSES, keeping the last pass's
    layout. ``at``: each matched collective's place among its rank's collectives."""
    n = len(summaries)
    floors = [summary.no_floors(s) for s in summaries]
    held = np.full(len(rank), NO_FLOOR, dtype=np.int64)
    horizon = None
    for passes in range(1, MAX_PASSES + 1):
        lay = summary.layouts(summaries, durs, floors)
        start = np.array([lay[r].starts[j] for r, j in zip(rank, at)], dtype=np.int64)
        # this pass's layout: each collective lasts its transfer or until the floor it was held to
        final = np.maximum(held, start + transfer) - start
        ends = pd.Series(start + transfer).groupby(key).transform("max").to_numpy()
        if (final + start == ends).all():  # every rank's copy of each collective ends at the same time
            return passes, final, None
        if horizon is None:  # the span of the first pass: as if no rank waited for another
            first = min(x.first for x in lay if x.first is not None)
            last = max(x.last for x in lay if x.last is not None)
            horizon = first + HORIZON_FACTOR * n * max(last - first, 1)
        if int(ends.max()) > horizon:
            return passes, final, (f"joint replay stopped at pass {passes}: a collective would end past "
                                   f"{HORIZON_FACTOR} x the {n} ranks' span (matched collectives in different "
                                   "orders on the ranks?); the last pass's layout is kept")
        held = np.maximum(held, ends)
        for r, j, e in zip(rank, at, held):
            floors[r][j] = e
    return MAX_PASSES, final, (f"joint replay stopped after {MAX_PASSES} passes before every collective settled; "
                               "the collectives' waits are a lower bound")


def replay_ranks(traces: Sequence[Any], predictions: Sequence[Prediction],
                 clocks: Sequence[CpuClock]) -> JointReplay:
    """``joint_replay`` with the launch back-pressure (module doc): a fixed point from below, in at most
    MAX_QUEUE_ROUNDS rounds of delays added to the ranks' host clocks."""
    cl = list(clocks)
    joint = joint_replay(traces, predictions, cl)
    for _ in range(MAX_QUEUE_ROUNDS):
        delays = [queue_delays(t, tl) for t, tl in zip(traces, joint.timelines)]
        if not any(len(at) for at, _ in delays):
            break
        cl = [c.delayed(at, d) if len(at) else c for c, (at, d) in zip(cl, delays)]
        joint = joint_replay(traces, predictions, cl)
    return joint


def queue_delays(tables: Any, timeline: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """(origin end of each launch call that a full launch queue would block, the host time it adds) on the
    replayed ``timeline`` (overhead.queue_delay_ns: a launch waits while its stream holds LAUNCH_QUEUE_DEPTH
    pending launches; the host carries the delay). Empty when no queue fills."""
    q = derived(tables, _queue_layout)
    if q is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    end = np.maximum.reduceat(timeline.gpu_end_ns[q.by_call], q.firsts)  # each call's last kernel end
    issued = timeline.ts_ns[q.call_ev] + timeline.dur_ns[q.call_ev]  # the launch call's replayed return
    order = np.argsort(issued, kind="stable")
    issued, end, used, stream = issued[order], end[order], q.calls_used[order], q.stream[order]
    total = overhead.queue_delay_ns(issued, end, stream)
    steps = np.diff(total, prepend=0)  # total is non-decreasing: the host carries each delay forward
    hit = np.flatnonzero(steps > 0)
    return q.call_end[used[hit]], steps[hit]


def recorded_blocks(tables: Any) -> tuple[np.ndarray, np.ndarray]:
    """``_recorded_blocks``, once per trace (Tables.derived: every clock of a rank reads the same recording)."""
    return derived(tables, _recorded_blocks)


def _recorded_blocks(tables: Any) -> tuple[np.ndarray, np.ndarray]:
    """(origin start, ns) of the host time each launch call of the recording spent blocked on a full launch queue.
    A call is blocked where the GPU was far behind it (its own work started QUEUE_LAG_NS or more after it returned:
    the queue was deep) and it returned when a slot freed (within SLOT_NS after a kernel of its stream ended); its
    wait is its protected span (floors.CUPTI_CALL_MAX_NS less than its duration: what the overhead model leaves to
    the host) less the median one of the unblocked launch calls (the call's own cost). Which launch frees the slot
    is not counted: LAUNCH_QUEUE_DEPTH (1,021) is measured with small kernels, and on Lambda's ResNet50 TF32 step
    (cuDNN kernels, the GPU 360-470 ms behind the host) the returns follow some kernel's end by a median 8.6 us but
    the one 1,021 launches before in 49 of 812 long calls only. The origin GPU's pace is in these waits: a GPU-bound
    step recorded with full queues keeps its host at that pace on every target unless they are taken out; the
    replay's own back-pressure (queue_delays) puts back what the target's GPU times call for. Empty where no queue
    can fill."""
    q = derived(tables, _queue_layout)
    empty = np.zeros(0, dtype=np.int64)
    if q is None:
        return empty, empty
    calls, g = tables.calls, tables.gpu
    s = calls[S.TS].to_numpy(dtype=np.int64)[q.calls_used]
    r = q.call_end[q.calls_used].astype(np.int64)
    rows_ts = g[S.TS].to_numpy(dtype=np.int64)[q.by_call]
    own_start = np.minimum.reduceat(rows_ts, q.firsts)  # each call's first kernel start
    kend = np.maximum.reduceat(g[S.END].to_numpy(dtype=np.int64)[q.by_call], q.firsts)
    slot = np.zeros(len(s), dtype=bool)
    for k in np.unique(q.stream):
        on = np.flatnonzero(q.stream == k)
        ends = np.sort(kend[on])
        j = np.searchsorted(ends, r[on], side="right") - 1
        slot[on] = (j >= 0) & (r[on] - ends[np.maximum(j, 0)] <= SLOT_NS)
    protected = np.maximum(r - s - CUPTI_CALL_MAX_NS, 0)
    blocked = (own_start - r >= QUEUE_LAG_NS) & slot & (protected > 0)
    if not blocked.any():
        return empty, empty
    own = float(np.median(protected[~blocked])) if (~blocked).any() else 0.0
    wait = np.maximum(protected[blocked] - int(own), 0)
    keep = wait > 0
    return s[blocked][keep], wait[keep]


@dataclass(frozen=True)
class _QueueLayout:
    """What queue_delays reads of a trace that no replay changes (built once per trace: Tables.derived): the launch
    calls used (ascending), the event of each, its first row's (device, stream), the rows grouped by call and where
    each call's group starts, and every call's origin end."""

    calls_used: np.ndarray
    call_ev: np.ndarray
    stream: np.ndarray
    by_call: np.ndarray
    firsts: np.ndarray
    call_end: np.ndarray


def _queue_layout(tables: Any) -> Optional[_QueueLayout]:
    """None where no queue can fill (no more launch calls than the queue holds)."""
    g, calls = tables.gpu, tables.calls
    launch = g[S.LAUNCH].to_numpy()
    has = np.flatnonzero(launch >= 0)
    # one queue entry per launch call (a CUDA-graph launch runs many kernels): its first row's stream, and the
    # slot frees when its last kernel ends
    by_call = has[np.argsort(launch[has], kind="stable")]
    calls_used, firsts = np.unique(launch[by_call], return_index=True)
    if len(calls_used) <= overhead.LAUNCH_QUEUE_DEPTH:
        return None
    rows = by_call[firsts]  # stable: each call's first row
    stream = (g[S.DEVICE].to_numpy()[rows] << 32) + g[S.STREAM].to_numpy()[rows]
    return _QueueLayout(calls_used, calls[S.EVENT].to_numpy()[calls_used], stream, by_call, firsts,
                        calls[S.END].to_numpy())

"""A one-GPU training step predicted on N GPUs with DDP or FSDP: the entry points below the commands.

Contract: ``synthesize(tables, prediction, ScaleOut) -> Synthesized``: the tables with the data-parallel
communication laid in (communication streams, their dependencies, the copies DDP/FSDP add; timeline/commstream.py)
and the prediction extended to it (the added kernels priced by scale/dataparallel.py; FSDP's optimizer on a 1/N
shard). ``scale_out(tables, prediction, ScaleOut, clock) -> ScaledOut``: that, replayed per rank as a run of one
rank is (timeline/joint.replay_ranks: the launch-queue back-pressure included; every rank runs the same step: no
straggler, the same host). One rank is the identity: nothing is added, the prediction and its replay are the
one-GPU ones. ``prediction`` is the engine's for these tables on the target; build the host clock
(pipeline.host_clock) on the input tables: the added events are launches the clock ignores. pipeline.Run.replay
calls it for ``--world-size N``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Optional

import numpy as np
import pandas as pd

from habitat_trace.errors import UnsupportedTraceError
from habitat_trace.ingest import classify as K
from habitat_trace.ingest import schema as S
from habitat_trace.scale import collective as C
from habitat_trace.scale import dataparallel as D
from habitat_trace.scale.dp_host import HOST_CV, HOST_UNIT_NS, expected_max_normal, host_slowdown
from habitat_trace.scale.params import COLUMNS, Params, recover
from habitat_trace.scale.prediction import (COLLECTIVE_SYNTHESIZED, COPY_SYNTHESIZED, KernelFacts, Prediction)
from habitat_trace.timeline.commstream import add_events
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.intervals import covered, union_length
from habitat_trace.timeline.joint import replay_ranks
from habitat_trace.timeline.replay import Timeline, cpu_map

OPTIMIZER_STEP = "Optimizer.step"  # torch.optim's record_function around every optimizer's step()
# Host time of each added kernel that no fitted host cost covers (scale/dp_host.py): the same host's un-profiled
# median of the op that issues it in the real run (FSDP1's flat gradient is an aten::cat); a collective, and an op
# this trace never ran, cost one kernel launch (cudaLaunchKernel) on top of the plan's host rows.
HOST_ANALOG = {D.FSDP_FLATTEN: "aten::cat"}
# Kernels whose issue is inside a host cost the plan prices (scale/dp_host.py: DDP's hook per gradient and its
# copy_bucket_to_grad, FSDP2's copy-out in its pre-forward/backward hooks): no launch of their own
IN_HOOK = (D.DDP_COPY_IN, D.DDP_COPY_OUT, D.FSDP2_COPY_OUT)
LAUNCH_CALL = "cudaLaunchKernel"
EMPTY_PARAMS = Params(pd.DataFrame(columns=list(COLUMNS)), "", ())


@dataclass(frozen=True)
class Synthesized:
    """The tables with the scale-out's kernels added, the prediction aligned with them, and what was added."""

    tables: Any
    prediction: Prediction
    plan: D.Plan
    params: Params
    added: np.ndarray  # rows of tables.gpu that were synthesized (plan.kernels order)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScaledOut:
    """The per-rank step on N GPUs: ``synthesized`` and its ``timeline`` (every rank alike), replayed on ``clock``
    (the host clock with the added kernels' issue and the launch-queue delays)."""

    synthesized: Synthesized
    timeline: Timeline
    clock: CpuClock

    @property
    def warnings(self) -> tuple[str, ...]:
        """The parameter recovery's and the plan's warnings, then the prediction's."""
        return tuple(dict.fromkeys(self.synthesized.warnings + self.synthesized.prediction.warnings))

    def communication(self) -> pd.DataFrame:
        """Per step: compute busy, communication busy and exposed communication (only communication running), ns."""
        t, tl = self.synthesized.tables, self.timeline
        comm = np.zeros(len(t.gpu), dtype=bool)
        comm[self.synthesized.added] = self.synthesized.prediction.method[self.synthesized.added] == \
            COLLECTIVE_SYNTHESIZED
        rows = []
        for step, g in pd.Series(np.arange(len(t.gpu))).groupby(t.gpu[S.STEP].to_numpy()):
            r = g.to_numpy()
            s, e, c = tl.gpu_start_ns[r], tl.gpu_end_ns[r], comm[r]
            busy, compute = union_length(s, e), union_length(s[~c], e[~c])
            rows.append({"step": int(step), "compute_busy_ns": compute, "comm_busy_ns": union_length(s[c], e[c]),
                         "exposed_comm_ns": busy - compute, "collectives": int(c.sum())})
        return pd.DataFrame(rows)


def synthesize(tables: Any, prediction: Prediction, so: D.ScaleOut, params: Optional[Params] = None) -> Synthesized:
    """``tables`` and ``prediction`` (the engine's, on the target) with ``so``'s communication added (module doc)."""
    if so.world_size == 1:
        empty = D.plan(tables, EMPTY_PARAMS, prediction.target, so)
        return Synthesized(tables, prediction, empty, params or EMPTY_PARAMS, np.zeros(0, dtype=np.int64))
    _refuse_distributed(tables)
    params = params or recover(tables)
    plan = D.plan(tables, params, prediction.target, so)
    new, added = add_events(tables, plan)
    pred = _extend(tables, new, prediction, plan, added)
    return Synthesized(new, pred, plan, params, added, plan.warnings)


def scale_out(tables: Any, prediction: Prediction, so: D.ScaleOut, clock: Optional[CpuClock] = None,
              params: Optional[Params] = None, unit_ns: float = HOST_UNIT_NS,
              worst_contention: bool = False, host_work: bool = True,
              prepared: Optional["Prepared"] = None) -> ScaledOut:
    """The per-rank step of ``so`` replayed on ``clock`` (the target host's, pipeline.host_clock; None: the recorded
    CPU times), as a run of one rank. The compute kernels a collective overlaps are then slowed for the SMs its
    channels hold (``contend``) and the step replayed once more. ``worst_contention`` (the slow end of a range):
    every compute kernel from the step's first collective on is slowed as if one overlapped it throughout: a rank
    that waits for a later one holds its collective's SMs for the wait, which a run of one rank cannot show.
    ``host_work`` False: the added kernels cost the host nothing and a rank's host is one GPU's (explain's split of
    the step); True: a rank's host runs at the slowest of N hosts' pace (dp_host.host_slowdown). ``prepared``:
    what does not depend on the clock (``prepare``), shared by the replays of one scale-out on several clocks."""
    prep = prepared or prepare(tables, prediction, so, params)
    syn = prep.synthesized
    clock = clock or CpuClock.identity()
    if so.world_size > 1 and host_work:
        clock = replace(clock, speed=clock.speed / host_slowdown(so.world_size))
        clock = clock.delayed(*host_delays(syn, clock, unit_ns))
    joint = replay_ranks([syn.tables], [syn.prediction], [clock])
    if prep.channels > 0:
        syn = replace(syn, prediction=contend(syn, joint.timelines[0], prep.slowdown, worst_contention,
                                              joint.clocks[0] or clock))
        joint = replay_ranks([syn.tables], [syn.prediction], [clock])
    return ScaledOut(syn, joint.timelines[0], joint.clocks[0] or clock)


@dataclass
class Prepared:
    """A scale-out's synthesized rank and, computed on first use, its kernels' slowdown on the SMs the collectives
    leave: the parts of ``scale_out`` that no host clock changes."""

    tables: Any
    prediction: Prediction
    synthesized: Synthesized
    channels: int
    _slowdown: Optional[np.ndarray] = None

    @property
    def slowdown(self) -> np.ndarray:
        if self._slowdown is None:
            self._slowdown = slowdown_fewer_sms(self.tables, self.prediction, self.synthesized.tables, self.channels)
        return self._slowdown


def prepare(tables: Any, prediction: Prediction, so: D.ScaleOut, params: Optional[Params] = None) -> Prepared:
    """``synthesize`` once, for every clock a scale-out is replayed on."""
    syn = synthesize(tables, prediction, so, params)
    return Prepared(tables, prediction, syn, channels_of(syn.plan))


def channels_of(plan: D.Plan) -> int:
    """The SMs the plan's collectives hold while they run: the scale-out's ``nccl_channels``, or NCCL's count on the
    plan's topology (scale/collective.nccl_channels); 0 without collectives."""
    if plan.topology is None or not len(plan.kernels) or not (plan.kernels["collective"] != "").any():
        return 0
    so = plan.scaleout
    return int(so.nccl_channels) if so.nccl_channels is not None else C.nccl_channels(plan.topology)


def slowdown_fewer_sms(tables: Any, prediction: Prediction, synthesized: Any, channels: int) -> np.ndarray:
    """Per row of ``synthesized.gpu``: how much slower its kernel runs on the target with ``channels`` fewer SMs (at
    least one left), by the engine's laws from the same origin (>= 1; 1 for the rows the scale-out added)."""
    from habitat_trace.scale.engine import predict

    target = prediction.target
    # both by the law (on the target itself the engine keeps the recorded times): the ratio is the law's alone
    law = replace(target, extra={**target.extra, "habitat_contention": channels})
    full = predict(tables, prediction.origin, law).dur_ns
    fewer = predict(tables, prediction.origin, law.with_sms(max(int(target.sms) - int(channels), 1))).dur_ns
    ratio = np.maximum(fewer / np.maximum(full, 1).astype(np.float64), 1.0)
    at = pd.Index(tables.gpu[S.EVENT].to_numpy()).get_indexer(synthesized.gpu[S.EVENT].to_numpy())
    return np.where(at >= 0, ratio[np.maximum(at, 0)], 1.0)


def host_delays(syn: Synthesized, clock: CpuClock, unit_ns: float = HOST_UNIT_NS) -> tuple[np.ndarray, np.ndarray]:
    """(origin CPU time, host ns) of every added kernel's issue (HOST_ANALOG) and of the plan's host work (FSDP2's
    hooks: ``host_u`` trivial-op units of ``unit_ns`` each, at the clock's speed), for CpuClock.delayed."""
    t = syn.tables
    k, h = syn.plan.kernels, syn.plan.host
    if not len(k) and not len(h):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)

    def median(df: pd.DataFrame, name: str) -> float:
        m = df[S.NAME].to_numpy() == name
        if not m.any():
            return float("nan")
        return float(np.median(clock(df[S.END].to_numpy()[m]) - clock(df[S.TS].to_numpy()[m])))

    launch = median(t.calls, LAUNCH_CALL)
    launch = 0.0 if np.isnan(launch) else launch
    cost = {name: median(t.ops, op) for name, op in HOST_ANALOG.items()}
    ns = np.array([0.0 if n in IN_HOOK else launch if np.isnan(cost.get(n, np.nan)) else cost[n]
                   for n in k["name"]], dtype=np.float64)
    hook_ns = h["host_u"].to_numpy(dtype=np.float64) * float(unit_ns) / clock.speed
    at = np.concatenate((k["launch_ns"].to_numpy().astype(np.int64), h["at_ns"].to_numpy().astype(np.int64)))
    return at, np.maximum(np.rint(np.concatenate((ns, hook_ns))), 0).astype(np.int64)


def contend(syn: Synthesized, timeline: Timeline, slowdown: np.ndarray, worst: bool = False,
            clock: Optional[CpuClock] = None) -> Prediction:
    """The prediction with every compute kernel slowed for the part of it the collectives hold SMs on ``timeline``:
    there it runs as on the target with the collective's channels fewer SMs (``slowdown`` per row: that time over
    its time on all SMs, slowdown_fewer_sms): new = dur x (1 + held share x (slowdown - 1)). Held: wherever a
    collective's kernel overlaps it, each collective held for its transfer and then for its expected spin waiting for
    the slowest peer (``spin_ns``; an NCCL kernel spins on its SMs until every rank has joined: docs/distributed.md,
    "Contention"); ``clock``: the host clock the timeline was replayed on. ``worst``: every compute kernel that
    starts after its step's first collective counts as held throughout."""
    p, gpu = syn.prediction, syn.tables.gpu
    coll = np.zeros(len(gpu), dtype=bool)
    coll[syn.added] = p.method[syn.added] == COLLECTIVE_SYNTHESIZED
    s, e = timeline.gpu_start_ns, timeline.gpu_end_ns
    spin = np.zeros(len(gpu), dtype=np.int64)
    spin[syn.added] = spin_ns(syn, timeline, clock)
    overlap = covered(s[coll], e[coll] + spin[coll], s, e).astype(np.float64)
    frac = np.where(coll | (e <= s), 0.0, np.minimum(overlap / np.maximum(e - s, 1), 1.0))
    if worst and coll.any():
        step = gpu[S.STEP].to_numpy()
        first = pd.Series(s[coll]).groupby(step[coll]).min().reindex(step).to_numpy()
        frac = np.where(~coll & np.isfinite(first) & (s >= np.nan_to_num(first, nan=np.inf)), 1.0, frac)
    stretched = np.rint(p.dur_ns * (1.0 + frac * (np.asarray(slowdown, dtype=np.float64) - 1.0))).astype(np.int64)
    return replace(p, dur_ns=np.maximum(stretched, p.dur_ns))


def spin_ns(syn: Synthesized, timeline: Timeline, clock: Optional[CpuClock] = None) -> np.ndarray:
    """Per added kernel (plan order): how long a collective is expected to hold its SMs beyond its own transfer,
    waiting for the slowest peer (0 for the copies). Each rank's host runs its step at a pace that varies with
    coefficient of variation c (dp_host.HOST_CV, measured on the solo runs), so t into the step the slowest of N
    hosts lags this one by c e_N t (e_N: dp_host.expected_max_normal). A collective launched t into the step that
    waited q in its stream's queue before it started (the GPU was behind the host) starts as late on a peer lagging
    less than q: it spins only for max(0, c e_N t - q). A GPU-bound step's collectives, queued behind the compute,
    start together on every rank; a launch-bound step's start when their host issues them and wait for the others."""
    k = syn.plan.kernels
    if not len(k):
        return np.zeros(0, dtype=np.int64)
    clock = clock or CpuClock.identity()
    launch = cpu_map(clock(k["launch_ns"].to_numpy(dtype=np.int64)), timeline.breaks)
    steps = syn.tables.steps[S.TS].to_numpy(dtype=np.int64)
    step = np.clip(k["step"].to_numpy(dtype=np.int64), 0, max(len(steps) - 1, 0))
    start = cpu_map(clock(steps[step]), timeline.breaks) if len(steps) else launch
    lag = HOST_CV * expected_max_normal(syn.plan.scaleout.world_size) * np.maximum(launch - start, 0)
    queued = np.maximum(timeline.gpu_start_ns[syn.added] - launch, 0)
    out = np.maximum(np.rint(lag - queued), 0).astype(np.int64)
    return np.where(k["collective"].to_numpy() != "", out, 0)


def decontended(tables: Any, prediction: Prediction) -> Prediction:
    """A rank trace's prediction with the contention its recording shows taken out: each compute kernel that the
    rank's own NCCL kernels overlapped for a share f of its recorded time ran (1 + f x (r - 1)) x longer, r its
    slowdown on the SMs their channels (the NCCL kernels' grid) leave (``contend``'s law); divided out here. The low
    end of a joint replay's range: the profiled window's waits kept the collectives' SMs longer than the un-profiled
    run's do."""
    g = tables.gpu
    nccl = g[S.KCLASS].to_numpy() == K.NCCL
    grid = g["grid_x"].to_numpy()[nccl] if "grid_x" in g.columns else np.zeros(0)
    channels = int(np.median(grid[grid > 0])) if (grid > 0).any() else 0
    if not nccl.any() or channels <= 0:
        return prediction
    s = g[S.TS].to_numpy()
    e = s + g[S.DUR].to_numpy()
    frac = np.where(nccl | (e <= s), 0.0,
                    np.minimum(covered(s[nccl], e[nccl], s, e).astype(np.float64) / np.maximum(e - s, 1), 1.0))
    slower = slowdown_fewer_sms(tables, prediction, tables, channels)
    dur = np.maximum(np.rint(prediction.dur_ns / (1.0 + frac * (slower - 1.0))), 1).astype(np.int64)
    return replace(prediction, dur_ns=dur)


def _refuse_distributed(tables: Any) -> None:
    nccl = int((tables.gpu[S.KCLASS].to_numpy() == K.NCCL).sum())
    if nccl:
        info = tables.distributed
        who = f", rank {info.rank} of {info.world_size}" if info is not None else ""
        raise UnsupportedTraceError(
            f"{tables.path}: already a distributed trace ({nccl} NCCL kernels{who}): scale-out starts from a one-GPU "
            "trace; to replay the ranks of a distributed run, give the directory of their traces (compare DIR)")


def _extend(old: Any, new: Any, p: Prediction, plan: D.Plan, added: np.ndarray) -> Prediction:
    """``p`` (aligned with old.gpu) aligned with new.gpu: the old rows by event, the added ones priced by the plan,
    the optimizer's kernels scaled by plan.optimizer_factor."""
    at = pd.Index(old.gpu[S.EVENT].to_numpy()).get_indexer(new.gpu[S.EVENT].to_numpy())
    kept = at >= 0
    n = len(new.gpu)
    dur = np.ones(n, dtype=np.int64)
    method = np.full(n, COPY_SYNTHESIZED, dtype=object)
    reason = np.full(n, "", dtype=object)
    dur[kept], method[kept], reason[kept] = p.dur_ns[at[kept]], p.method[at[kept]], p.reason[at[kept]]
    k = plan.kernels
    dur[added] = k["dur_ns"].to_numpy()
    method[added] = np.where(k["collective"].to_numpy() != "", COLLECTIVE_SYNTHESIZED, COPY_SYNTHESIZED)
    warnings = list(p.warnings)
    if plan.optimizer_factor != 1.0:
        opt = kept & new.gpu[S.ROOT_OP_NAME].str.startswith(OPTIMIZER_STEP).to_numpy()
        dur[opt] = np.maximum(np.rint(dur[opt] * plan.optimizer_factor), np.minimum(dur[opt], D.KERNEL_FLOOR_NS))
        reason[opt] = [r + "; " * bool(r) + f"FSDP: the optimizer steps a 1/{plan.scaleout.world_size} shard"
                       for r in reason[opt]]
        if not opt.any():
            warnings.append("no Optimizer.step in the trace: the optimizer's kernels keep their one-GPU time")
    facts = _extend_facts(p.facts, at, n) if p.facts is not None else None
    return replace(p, dur_ns=dur, method=method, reason=reason, facts=facts, warnings=tuple(warnings))


def _extend_facts(facts: KernelFacts, at: np.ndarray, n: int) -> KernelFacts:
    """Each per-kernel array re-aligned by ``at`` (new row -> old row, -1 added): NaN, False or "" for added rows."""
    out = {}
    for f in fields(facts):
        a = np.asarray(getattr(facts, f.name))
        fill: Any = np.nan if a.dtype.kind == "f" else (False if a.dtype.kind == "b" else "")
        b = np.full(n, fill, dtype=a.dtype if a.dtype.kind in "fbO" else object)
        b[at >= 0] = a[at[at >= 0]]
        out[f.name] = b
    return KernelFacts(**out)

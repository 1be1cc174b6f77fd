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
from habitat_trace.scale import dataparallel as D
from habitat_trace.scale.params import COLUMNS, Params, recover
from habitat_trace.scale.prediction import (COLLECTIVE_SYNTHESIZED, COPY_SYNTHESIZED, KernelFacts, Prediction)
from habitat_trace.timeline.commstream import add_events
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.intervals import covered, union_length
from habitat_trace.timeline.joint import replay_ranks
from habitat_trace.timeline.replay import Timeline

OPTIMIZER_STEP = "Optimizer.step"  # torch.optim's record_function around every optimizer's step()
# Host time of each added kernel: the same host's un-profiled median of the op that issues it in the real run
# (DDP's mul_out is an aten::mul, copy_bucket_to_grad an aten::copy_, FSDP's flat gradient an aten::cat); a
# collective, and an op this trace never ran, cost one kernel launch (cudaLaunchKernel): a lower bound, since
# ProcessGroupNCCL's issue path and FSDP's Python hooks are not in a one-GPU trace.
HOST_ANALOG = {D.DDP_COPY_IN: "aten::mul", D.DDP_COPY_OUT: "aten::copy_", D.FSDP_FLATTEN: "aten::cat"}
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
              params: Optional[Params] = None) -> ScaledOut:
    """The per-rank step of ``so`` replayed on ``clock`` (the target host's, pipeline.host_clock; None: the recorded
    CPU times), as a run of one rank. With ``so.comm_sm_share`` > 0 the compute kernels a collective overlaps are
    slowed (``contend``) and the step replayed once more."""
    syn = synthesize(tables, prediction, so, params)
    clock = clock or CpuClock.identity()
    if so.world_size > 1:
        clock = clock.delayed(*host_delays(syn, clock))
    joint = replay_ranks([syn.tables], [syn.prediction], [clock])
    if so.world_size > 1 and so.comm_sm_share > 0:
        syn = replace(syn, prediction=contend(syn, joint.timelines[0], so.comm_sm_share))
        joint = replay_ranks([syn.tables], [syn.prediction], [clock])
    return ScaledOut(syn, joint.timelines[0], joint.clocks[0] or clock)


def host_delays(syn: Synthesized, clock: CpuClock) -> tuple[np.ndarray, np.ndarray]:
    """(origin CPU time, host ns) of every added kernel's issue (HOST_ANALOG), for CpuClock.delayed."""
    t = syn.tables
    k = syn.plan.kernels
    if not len(k):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)

    def median(df: pd.DataFrame, name: str) -> float:
        m = df[S.NAME].to_numpy() == name
        if not m.any():
            return float("nan")
        return float(np.median(clock(df[S.END].to_numpy()[m]) - clock(df[S.TS].to_numpy()[m])))

    launch = median(t.calls, LAUNCH_CALL)
    launch = 0.0 if np.isnan(launch) else launch
    cost = {name: median(t.ops, op) for name, op in HOST_ANALOG.items()}
    ns = np.array([launch if np.isnan(cost.get(n, np.nan)) else cost[n] for n in k["name"]], dtype=np.float64)
    return k["launch_ns"].to_numpy().astype(np.int64), np.maximum(np.rint(ns), 0).astype(np.int64)


def contend(syn: Synthesized, timeline: Timeline, share: float) -> Prediction:
    """The prediction with every compute kernel stretched for the part of it a collective overlaps on ``timeline``,
    as if it kept 1 - ``share`` of the SMs there: new = dur x (1 + overlap x share / (1 - share))."""
    p, gpu = syn.prediction, syn.tables.gpu
    coll = np.zeros(len(gpu), dtype=bool)
    coll[syn.added] = p.method[syn.added] == COLLECTIVE_SYNTHESIZED
    s, e = timeline.gpu_start_ns, timeline.gpu_end_ns
    overlap = covered(s[coll], e[coll], s, e).astype(np.float64)
    frac = np.where(coll | (e <= s), 0.0, overlap / np.maximum(e - s, 1))
    stretched = np.rint(p.dur_ns * (1.0 + np.minimum(frac, 1.0) * share / (1.0 - share))).astype(np.int64)
    return replace(p, dur_ns=np.maximum(stretched, p.dur_ns))


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

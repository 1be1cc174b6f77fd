"""``explain(run, targets) -> Explanation``: which ops and kernels change most on each target, and why.

Pure: built from ``analysis.kernels.kernel_report`` (the engine's own per-kernel facts) and the replayed timelines,
one prediction and joint replay of the run per GPU (pipeline.Run.replay). Three tables, a row per target (and
rank), so one target and several read the same way:
- ``steps``: per rank, the step on the origin and on the target: iteration and its range (pipeline.run.Headline:
  ``*iteration_low_ms``..``*iteration_high_ms``, ``range_source``), GPU busy, GPU idle (the launch-bound
  gap), its matched collectives' transfer and wait for the other ranks (several ranks only), the profiler
  overhead removed;
- ``ops`` (by top-level op) and ``kernels``: of the rank that sets the step on the target (the slowest), the
  ``top`` whose GPU time changes most;
- ``scale_out`` (``--world-size N`` only): per target, the one-GPU step replayed there and what the scale-out adds
  to it, three parts that sum to the N-rank iteration (pipeline.Run.scale_out_split).
Times are per step (summed over the ProfilerSteps, divided by their number; GPU events outside the steps are
left out). ``share`` is the op's (kernel's) GPU time on the target over the target's step: the iteration time,
or the summed GPU time of the step where streams overlap so much that it is larger; so shares sum to <= 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.analysis.compare import collective_split
from habitat_trace.pipeline import Run
from habitat_trace.pipeline.host import overhead_ms
from habitat_trace.pipeline.run import RankReplay, Replay
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.prediction import COLLECTIVE_SYNTHESIZED, COPY, COPY_SYNTHESIZED, SUSTAINED

# γ >= this: the kernel's origin time is mostly DRAM traffic (docs/method.md step 4)
MEMORY_BOUND_GAMMA = 0.5
NO_OP = "(no op)"


@dataclass(frozen=True)
class Explanation:
    steps: pd.DataFrame
    ops: pd.DataFrame
    kernels: pd.DataFrame
    warnings: tuple[str, ...]
    scale_out: pd.DataFrame = field(default_factory=pd.DataFrame)


def explain(run: Run, targets: Sequence[GpuSpec], top: int = 15) -> Explanation:
    """The tables of the module doc, for every target in order."""
    steps, ops, kernels, warnings, split = [], [], [], [], []
    for target in targets:
        replay = run.replay(target)
        if run.options.data_parallel.active:
            split.append({"target": target.name, "world_size": run.options.data_parallel.world_size,
                          "strategy": run.options.data_parallel.strategy, **run.scale_out_split(target)})
        steps += step_rows(run.baseline(), replay)
        slow = replay.slowest()
        ops_t, kernels_t = changes(slow, top, None if run.single else slow.rank.number)
        ops.append(ops_t)
        kernels.append(kernels_t)
        warnings += [f"{target.name}: {w}" for w in replay.warnings]
    return Explanation(pd.DataFrame(steps), pd.concat(ops, ignore_index=True),
                       pd.concat(kernels, ignore_index=True), tuple(dict.fromkeys(warnings)), pd.DataFrame(split))


def step_rows(before: Replay, after: Replay) -> list[dict[str, Any]]:
    """Per rank: the step on the origin and on the target (module doc)."""
    rows = []
    for i, (b, a) in enumerate(zip(before.ranks, after.ranks)):
        (it0, busy0), (it1, busy1) = (b.headline.iteration_ms, b.headline.gpu_busy_ms), \
            (a.headline.iteration_ms, a.headline.gpu_busy_ms)
        (tr0, wait0), (tr1, wait1) = collective_split(before, i), collective_split(after, i)
        rows.append({
            "origin": b.origin.name, "target": a.target.name,
            "rank": None if len(after.ranks) == 1 else a.rank.number, "steps": max(len(a.tables.steps), 1),
            "origin_iteration_ms": it0, "iteration_ms": it1,
            "origin_iteration_low_ms": b.headline.iteration_low_ms,
            "origin_iteration_high_ms": b.headline.iteration_high_ms,
            "iteration_low_ms": a.headline.iteration_low_ms, "iteration_high_ms": a.headline.iteration_high_ms,
            "range_source": a.headline.range_source, "origin_gpu_busy_ms": busy0, "gpu_busy_ms": busy1,
            "origin_gpu_idle_ms": it0 - busy0, "gpu_idle_ms": it1 - busy1,
            "origin_idle_share": _ratio(it0 - busy0, it0), "idle_share": _ratio(it1 - busy1, it1),
            "origin_transfer_ms": tr0, "transfer_ms": tr1, "origin_wait_ms": wait0, "wait_ms": wait1,
            "profiler_overhead_ms": overhead_ms(a.host),
        })
    return rows


def changes(after: RankReplay, top: int, rank: Optional[int] = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``top`` ops and kernels of one rank (``rank``: its number, None for a run of one) whose GPU time changes
    most (module doc)."""
    from habitat_trace.analysis.kernels import kernel_report

    tables = after.tables
    report = kernel_report(tables, after.prediction)
    steps = max(len(tables.steps), 1)
    if len(tables.steps):
        report = report[report["step"] >= 0]
    gpu_ms = report["dur_target_ns"].sum() / steps / 1e6
    denominator = max(after.headline.iteration_ms, gpu_ms)
    head = {"target": after.target.name, "rank": rank}
    return (pd.DataFrame([{**head, **r} for r in _groups(report, "root_op_name", steps, denominator, top)]),
            pd.DataFrame([{**head, **r} for r in _groups(report, "name", steps, denominator, top)]))


def _ratio(a: float, b: float) -> Optional[float]:
    return a / b if b > 0 else None


def _groups(report: pd.DataFrame, key: str, steps: int, denominator: float, top: int) -> list[dict[str, Any]]:
    """Aggregate by ``key``, rank by |change of time|, keep ``top``; time-weighted waves and γ over the rows that
    have them (kernels.NO_WAVES rows have none; a group of only such rows has none)."""
    r = report.assign(**{key: report[key].replace("", NO_OP)})
    w = r["dur_origin_ns"].astype(np.float64).clip(lower=1.0)
    law = r["gamma"].notna()
    r = r.assign(_w=w, _wl=w.where(law, 0.0), _wo=(r["waves_origin"] * w).fillna(0.0),
                 _wt=(r["waves_target"] * w).fillna(0.0), _g=(r["gamma"] * w).fillna(0.0), _u=r["flop_share"] * w)
    agg = r.groupby(key, sort=False).agg(
        count=("dur_origin_ns", "size"), origin_ns=("dur_origin_ns", "sum"), target_ns=("dur_target_ns", "sum"),
        w=("_w", "sum"), wl=("_wl", "sum"), wo=("_wo", "sum"), wt=("_wt", "sum"), g=("_g", "sum"), u=("_u", "sum"))
    agg["change_ns"] = agg["target_ns"] - agg["origin_ns"]
    agg = agg.reindex(agg["change_ns"].abs().sort_values(ascending=False, kind="stable").index)
    methods = _main(r, key, "method")
    reasons = _main(r, key, "reason")
    out = []
    for name, a in agg.head(top).iterrows():
        law = a["wl"] > 0
        gamma = float(a["g"] / a["wl"]) if law else None
        target_ms = float(a["target_ns"]) / steps / 1e6
        out.append({
            "name": str(name), "count_per_step": float(a["count"]) / steps,
            "origin_ms": float(a["origin_ns"]) / steps / 1e6, "target_ms": target_ms,
            "change_ms": float(a["change_ns"]) / steps / 1e6,
            "ratio": float(a["target_ns"] / a["origin_ns"]) if a["origin_ns"] > 0 else None,
            "waves_origin": float(a["wo"] / a["wl"]) if law else None,
            "waves_target": float(a["wt"] / a["wl"]) if law else None,
            "gamma": gamma, "bound": bound(methods.get(name, ""), gamma, float(a["u"] / a["w"])),
            "method": methods.get(name, ""), "reason": reasons.get(name, ""),
            "share": target_ms / denominator if denominator > 0 else 0.0,
        })
    return out


def bound(method: str, gamma: Optional[float], compute: float) -> str:
    """What limits a kernel (group): 'communication' for a scale-out's collectives, 'memory' for its copies (no γ:
    their bytes set their time); across chips (method
    'sustained') the largest share of the origin time: its FLOPs at the pipe's sustained rate (``compute``), its DRAM
    bytes at the achievable bandwidth (γ), or 'latency', the rest 1 - compute - γ that neither throughput explains
    (scale/crossarch.py moves it with SMs x clock); elsewhere 'memory' where γ >= MEMORY_BOUND_GAMMA, else
    'compute'. (The law's own latency part, the P-norm rest (1 - u^P - γ^P)^(1/P), is near 1 unless a throughput
    share is: a label by it would say 'latency' for nearly every kernel.)"""
    if method == COLLECTIVE_SYNTHESIZED:
        return "communication"
    if gamma is None:
        return "memory" if method in (COPY, COPY_SYNTHESIZED) else "communication"
    if method == SUSTAINED:
        latency = max(1.0 - compute - gamma, 0.0)
        return max((("compute", compute), ("memory", gamma), ("latency", latency)), key=lambda kv: kv[1])[0]
    return "memory" if gamma >= MEMORY_BOUND_GAMMA else "compute"


def _main(r: pd.DataFrame, key: str, column: str) -> dict[str, str]:
    """The value of ``column`` that covers most origin time in each group."""
    t = r.groupby([key, column], sort=False)["_w"].sum().reset_index()
    t = t.sort_values("_w", ascending=False, kind="stable").drop_duplicates(key)
    return dict(zip(t[key], t[column].astype(str)))

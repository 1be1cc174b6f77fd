"""``explain(trace, target) -> dict``: which ops and kernels change most on the target, and why.

Pure: built from ``analysis.kernels.kernel_report`` (the engine's own per-kernel facts) and the replayed timeline,
one prediction and replay per GPU (pipeline.scale).
Times are per step (summed over the ProfilerSteps, divided by their number; GPU events outside the steps are
left out). ``share`` is the op's (kernel's) GPU time on the target over the target's step: the iteration time,
or the summed GPU time of the step where streams overlap so much that it is larger; so shares sum to <= 1.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from habitat_trace import pipeline
from habitat_trace.ingest.trace import Trace
from habitat_trace.scale.gpu import GpuSpec

# γ >= this: the kernel's origin time is mostly DRAM traffic (docs/method.md step 4)
MEMORY_BOUND_GAMMA = 0.5
NO_OP = "(no op)"


def explain(trace: Trace, origin: GpuSpec, target: GpuSpec, top: int = 15,
            host: pipeline.Host = pipeline.Host()) -> dict[str, Any]:
    """The step before and after, and the ``top`` ops and kernels whose GPU time changes most (module doc)."""
    from habitat_trace.analysis.kernels import kernel_report

    clock = pipeline.host_clock(trace, host)
    scaled = pipeline.scale(trace, origin, target, clock=clock)
    report = kernel_report(trace, scaled.prediction)
    before = pipeline.headline(pipeline.scale(trace, origin, origin, clock=clock))[:2]
    after = pipeline.headline(scaled)[:2]
    steps = max(len(trace.steps), 1)
    if len(trace.steps):
        report = report[report["step"] >= 0]
    gpu_ms = report["dur_target_ns"].sum() / steps / 1e6
    denominator = max(after[0], gpu_ms)
    return {
        "origin": origin.name, "target": target.name, "steps": steps,
        "step": _step_summary(before, after),
        "profiler_overhead_ms": float(np.mean(clock.overhead_per_step_ns)) / 1e6 if len(clock.overhead_per_step_ns)
        else 0.0,
        "ops": _groups(report, "root_op_name", steps, denominator, top),
        "kernels": _groups(report, "name", steps, denominator, top),
    }


def _step_summary(before: tuple[float, float], after: tuple[float, float]) -> dict[str, Any]:
    """Iteration, GPU busy and GPU idle (the launch-bound gap: step time the GPU does nothing) per step."""
    (it0, busy0), (it1, busy1) = before, after
    return {
        "iteration_ms": [it0, it1], "gpu_busy_ms": [busy0, busy1], "gpu_idle_ms": [it0 - busy0, it1 - busy1],
        "idle_share": [_ratio(it0 - busy0, it0), _ratio(it1 - busy1, it1)],
    }


def _ratio(a: float, b: float) -> Optional[float]:
    return a / b if b > 0 else None


def _groups(report: pd.DataFrame, key: str, steps: int, denominator: float, top: int) -> list[dict[str, Any]]:
    """Aggregate by ``key``, rank by |change of time|, keep ``top``; time-weighted waves and γ."""
    r = report.assign(**{key: report[key].replace("", NO_OP)})
    w = r["dur_origin_ns"].astype(np.float64).clip(lower=1.0)
    r = r.assign(_w=w, _wo=r["waves_origin"] * w, _wt=r["waves_target"] * w, _g=r["gamma"] * w)
    agg = r.groupby(key, sort=False).agg(
        count=("dur_origin_ns", "size"), origin_ns=("dur_origin_ns", "sum"), target_ns=("dur_target_ns", "sum"),
        w=("_w", "sum"), wo=("_wo", "sum"), wt=("_wt", "sum"), g=("_g", "sum"))
    agg["change_ns"] = agg["target_ns"] - agg["origin_ns"]
    agg = agg.reindex(agg["change_ns"].abs().sort_values(ascending=False, kind="stable").index)
    methods = _main(r, key, "method")
    reasons = _main(r, key, "reason")
    out = []
    for name, a in agg.head(top).iterrows():
        gamma = float(a["g"] / a["w"])
        target_ms = float(a["target_ns"]) / steps / 1e6
        out.append({
            "name": str(name), "count_per_step": float(a["count"]) / steps,
            "origin_ms": float(a["origin_ns"]) / steps / 1e6, "target_ms": target_ms,
            "change_ms": float(a["change_ns"]) / steps / 1e6,
            "ratio": float(a["target_ns"] / a["origin_ns"]) if a["origin_ns"] > 0 else None,
            "waves_origin": float(a["wo"] / a["w"]), "waves_target": float(a["wt"] / a["w"]),
            "gamma": gamma, "bound": "memory" if gamma >= MEMORY_BOUND_GAMMA else "compute",
            "method": methods.get(name, ""), "reason": reasons.get(name, ""),
            "share": target_ms / denominator if denominator > 0 else 0.0,
        })
    return out


def _main(r: pd.DataFrame, key: str, column: str) -> dict[str, str]:
    """The value of ``column`` that covers most origin time in each group."""
    t = r.groupby([key, column], sort=False)["_w"].sum().reset_index()
    t = t.sort_values("_w", ascending=False, kind="stable").drop_duplicates(key)
    return dict(zip(t[key], t[column].astype(str)))

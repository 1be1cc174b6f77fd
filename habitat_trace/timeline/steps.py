"""Per-step figures of a trace, on the origin or a replayed target: CPU step time, GPU busy time (union of the
step's GPU events) and GPU span.

A GPU event belongs to the step whose ProfilerStep span contains its launch (see ingest.linking).
These are the figures ``inspect`` prints and ``validate``/the accuracy benchmark compare.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.timeline.intervals import union_length
from habitat_trace.ingest import schema as S
from habitat_trace.timeline.replay import Timeline


@dataclass(frozen=True)
class StepFigures:
    """Per-step figures in ns, one row per ProfilerStep (or one pseudo-step for a trace without steps)."""

    table: pd.DataFrame  # columns: step, number, cpu_ns, gpu_busy_ns, gpu_span_ns, kernels

    def mean_ms(self, column: str) -> float:
        return float(self.table[column].mean()) / 1e6 if len(self.table) else float("nan")


def step_figures(steps: pd.DataFrame, gpu: pd.DataFrame) -> StepFigures:
    rows = []
    start, end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    step_col = gpu[S.STEP].to_numpy()
    if len(steps) == 0:  # whole trace as one pseudo-step
        keys = [(S.NONE, -1, int(end.max() - start.min()) if len(gpu) else 0)]
        step_col = np.full(len(gpu), S.NONE)
    else:
        keys = list(zip(range(len(steps)), steps[S.STEP_NUMBER].tolist(), steps[S.DUR].tolist()))
    by_step = np.argsort(step_col, kind="stable")  # each step's GPU rows in row order, found by bisection
    sorted_steps = step_col[by_step]
    for row, number, cpu in keys:
        m = by_step[np.searchsorted(sorted_steps, row, "left"):np.searchsorted(sorted_steps, row, "right")]
        s, e = start[m], end[m]
        rows.append({
            "step": row, "number": int(number), "cpu_ns": int(cpu),
            "gpu_busy_ns": union_length(s, e),
            "gpu_span_ns": int(e.max() - s.min()) if len(m) else 0,
            "kernels": len(m),
        })
    return StepFigures(pd.DataFrame(rows))


def replayed_step_figures(trace: Any, timeline: Timeline) -> StepFigures:
    """Per-step figures on the target: GPU events at their replayed times, ProfilerStep spans (CPU step
    time) as replayed."""
    # the columns step_figures reads (a copy of the whole GPU table cost more than the figures)
    gpu = pd.DataFrame({S.TS: timeline.gpu_start_ns, S.END: timeline.gpu_end_ns, S.STEP: trace.gpu[S.STEP].to_numpy()})
    steps = trace.steps
    if len(steps):
        rows = steps[S.EVENT].to_numpy()
        ts, dur = timeline.ts_ns[rows], timeline.dur_ns[rows]
        steps = steps.assign(**{S.TS: ts, S.DUR: dur, S.END: ts + dur})
    return step_figures(steps, gpu)

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
    return _figures(steps, steps[S.DUR].to_numpy() if len(steps) else None, gpu[S.TS].to_numpy(),
                    gpu[S.END].to_numpy(), gpu[S.STEP].to_numpy())


def replayed_step_figures(trace: Any, timeline: Timeline) -> StepFigures:
    """Per-step figures on the target: GPU events at their replayed times, ProfilerStep spans (CPU step
    time) as replayed."""
    # arrays, not a GPU table and a steps table retimed: pandas' frames cost more than the figures (scale --to all
    # asks for three a target)
    steps = trace.steps
    cpu = timeline.dur_ns[steps[S.EVENT].to_numpy()] if len(steps) else None
    return _figures(steps, cpu, timeline.gpu_start_ns, timeline.gpu_end_ns, trace.gpu[S.STEP].to_numpy())


def _figures(steps: pd.DataFrame, cpu: np.ndarray | None, start: np.ndarray, end: np.ndarray,
             step_col: np.ndarray) -> StepFigures:
    """The figures of ``steps`` (their CPU times ``cpu``; None: no steps, the whole trace as one pseudo-step) from
    the GPU rows' ``start``, ``end`` and step."""
    if cpu is None:  # whole trace as one pseudo-step
        keys = [(S.NONE, -1, int(end.max() - start.min()) if len(start) else 0)]
        step_col = np.full(len(start), S.NONE)
    else:
        keys = list(zip(range(len(steps)), steps[S.STEP_NUMBER].tolist(), cpu.tolist()))
    by_step = np.argsort(step_col, kind="stable")  # each step's GPU rows in row order, found by bisection
    sorted_steps = step_col[by_step]
    cols: dict[str, list[int]] = {k: [] for k in ("step", "number", "cpu_ns", "gpu_busy_ns", "gpu_span_ns", "kernels")}
    for row, number, ns in keys:
        m = by_step[np.searchsorted(sorted_steps, row, "left"):np.searchsorted(sorted_steps, row, "right")]
        s, e = start[m], end[m]
        for k, v in zip(cols, (row, int(number), int(ns), union_length(s, e), int(e.max() - s.min()) if len(m) else 0,
                               len(m))):
            cols[k].append(v)
    if not keys:
        return StepFigures(pd.DataFrame(cols))
    # one int64 block: a frame of six lists took 0.23 ms, of the block 0.08 (three a target of scale --to all)
    return StepFigures(pd.DataFrame(np.array(list(cols.values()), dtype=np.int64).T, columns=list(cols)))

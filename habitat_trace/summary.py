"""Per-step figures of a trace: CPU step time, GPU busy time (union of the step's GPU events) and GPU span.

A GPU event belongs to the step whose ProfilerStep span contains its launch (see ingest.linking).
These are the figures ``inspect`` prints and ``validate``/the accuracy benchmark compare.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.intervals import union_length


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
        keys = [(i, int(steps[S.STEP_NUMBER].iat[i]), int(steps[S.DUR].iat[i])) for i in range(len(steps))]
    for row, number, cpu in keys:
        m = step_col == row
        s, e = start[m], end[m]
        rows.append({
            "step": row, "number": number, "cpu_ns": cpu,
            "gpu_busy_ns": union_length(s, e),
            "gpu_span_ns": int(e.max() - s.min()) if m.any() else 0,
            "kernels": int(m.sum()),
        })
    return StepFigures(pd.DataFrame(rows))

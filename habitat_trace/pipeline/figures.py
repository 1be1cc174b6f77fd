"""The step figures every command reports of a replayed timeline: ``iteration_figures(tables, timeline)`` and,
for step figures already measured (a trace validate reads back), ``steady_iteration(fig)``: one iteration rule;
``iteration_and_fastest``, what the range's two ends read (timeline/hostband.py).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from habitat_trace.ingest.trace import Tables
from habitat_trace.timeline.replay import Timeline
from habitat_trace.timeline.steps import replayed_step_figures

# torch.profiler's schedule keeps a warm-up before its first traced step because "the overhead at the beginning of
# profiling is high and easily brings skew to the profiling result" (torch.profiler.schedule's documentation); a
# ProfilerStep numbered this was traced with nothing before it (no warm-up, and the loop's first iteration when the
# profiler starts with the loop), so it is not a steady step while the trace has others (issue 35).
FIRST_STEP = 0


def iteration_figures(tables: Tables, timeline: Timeline) -> tuple[float, float]:
    """(iteration_ms, gpu_busy_ms) on a replayed timeline, over the steady ProfilerSteps (``steady``).

    iteration = max(the mean replayed ProfilerStep span, the mean replayed GPU busy time of a step): the replayed
    CPU span keeps a launch-bound step launch-bound (its blocking calls end when the GPU work ends on the target);
    the busy time covers steps without a blocking call, whose launch queue fills until the GPU's pace sets the
    period. Means first: with back-pressure the window's first step runs ahead and a later one waits for it, so
    only their average is the steady period (with a blocking call per step every span already covers its GPU
    work, and the two orders agree). Without ProfilerSteps the whole trace is one step (its replayed GPU span).
    """
    return steady_iteration(replayed_step_figures(tables, timeline).table, has_steps=len(tables.steps) > 0)


def steady(numbers: np.ndarray) -> np.ndarray:
    """Which of the ProfilerSteps numbered ``numbers`` are steady: all but FIRST_STEP while there are others."""
    numbers = np.asarray(numbers)
    keep = numbers != FIRST_STEP
    return keep if keep.any() else np.ones(len(numbers), dtype=bool)


def steady_iteration(fig: pd.DataFrame, has_steps: bool = True) -> tuple[float, float]:
    """(iteration_ms, gpu_busy_ms) from a step-figures table (timeline.steps) by iteration_figures' rule; also
    for a timeline already written, e.g. a predicted trace that validate reads back."""
    fig = fig[steady(fig["number"].to_numpy())] if has_steps else fig
    cpu_ns = (fig["cpu_ns"] if has_steps else fig["gpu_span_ns"]).to_numpy().astype(np.float64)
    busy_ns = fig["gpu_busy_ns"].to_numpy().astype(np.float64)
    return max(float(cpu_ns.mean()), float(busy_ns.mean())) / 1e6, float(busy_ns.mean()) / 1e6


def iteration_and_fastest(tables: Tables, timeline: Timeline) -> tuple[float, float]:
    """(iteration_ms, the shortest steady step in ms) on a replayed timeline: a step's own figure is max(its span,
    its GPU busy time), so a step that ran ahead of a full launch queue still counts its GPU work. Without
    ProfilerSteps both are the iteration. The range's two ends read these (timeline/hostband.py)."""
    fig = replayed_step_figures(tables, timeline).table
    if not len(tables.steps):
        it = steady_iteration(fig, has_steps=False)[0]
        return it, it
    rows = fig[steady(fig["number"].to_numpy())]
    fastest = float(np.maximum(rows["cpu_ns"].to_numpy(), rows["gpu_busy_ns"].to_numpy()).min()) / 1e6
    return steady_iteration(fig)[0], fastest

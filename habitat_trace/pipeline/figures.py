"""The step figures every command reports of a replayed timeline: ``iteration_figures(tables, timeline)`` and,
for step figures already measured (a trace validate reads back), ``steady_iteration(fig)``: one iteration rule.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from habitat_trace.ingest.trace import Tables
from habitat_trace.timeline.replay import Timeline
from habitat_trace.timeline.steps import replayed_step_figures


def iteration_figures(tables: Tables, timeline: Timeline) -> tuple[float, float]:
    """(iteration_ms, gpu_busy_ms) on a replayed timeline, over the ProfilerSteps.

    iteration = max(the mean replayed ProfilerStep span, the mean replayed GPU busy time of a step): the replayed
    CPU span keeps a launch-bound step launch-bound (its blocking calls end when the GPU work ends on the target);
    the busy time covers steps without a blocking call, whose launch queue fills until the GPU's pace sets the
    period. Means first: with back-pressure the window's first step runs ahead and a later one waits for it, so
    only their average is the steady period (with a blocking call per step every span already covers its GPU
    work, and the two orders agree). Without ProfilerSteps the whole trace is one step (its replayed GPU span).
    """
    return steady_iteration(replayed_step_figures(tables, timeline).table, has_steps=len(tables.steps) > 0)


def steady_iteration(fig: pd.DataFrame, has_steps: bool = True) -> tuple[float, float]:
    """(iteration_ms, gpu_busy_ms) from a step-figures table (timeline.steps) by iteration_figures' rule; also
    for a timeline already written, e.g. a predicted trace that validate reads back."""
    cpu_ns = (fig["cpu_ns"] if has_steps else fig["gpu_span_ns"]).to_numpy().astype(np.float64)
    busy_ns = fig["gpu_busy_ns"].to_numpy().astype(np.float64)
    return max(float(cpu_ns.mean()), float(busy_ns.mean())) / 1e6, float(busy_ns.mean()) / 1e6

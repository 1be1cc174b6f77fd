"""One-line summary of a scaled trace: origin -> target, mean per-step GPU busy time and span."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from habitat_trace.emit.replay import Timeline
from habitat_trace.ingest import schema as S
from habitat_trace.scale.prediction import Prediction
from habitat_trace.summary import StepFigures, step_figures


def replayed_step_figures(trace: Any, timeline: Timeline) -> StepFigures:
    """Per-step figures on the target: GPU events at their replayed times, ProfilerStep spans (CPU step
    time) as replayed."""
    gpu = trace.gpu.assign(**{S.TS: timeline.gpu_start_ns, S.END: timeline.gpu_end_ns})
    steps = trace.steps
    if len(steps):
        rows = steps[S.EVENT].to_numpy()
        ts, dur = timeline.ts_ns[rows], timeline.dur_ns[rows]
        steps = steps.assign(**{S.TS: ts, S.DUR: dur, S.END: ts + dur})
    return step_figures(steps, gpu)


def step_means_ms(trace: Any, timeline: Timeline | None) -> tuple[float, float]:
    """Mean per-step GPU busy time and GPU span (ms), on the origin (timeline None) or the target."""
    fig = step_figures(trace.steps, trace.gpu) if timeline is None else replayed_step_figures(trace, timeline)
    return fig.mean_ms("gpu_busy_ns"), fig.mean_ms("gpu_span_ns")


def describe(trace: Any, timeline: Timeline, prediction: Prediction, path: Path) -> str:
    busy0, span0 = step_means_ms(trace, None)
    busy, span = step_means_ms(trace, timeline)
    return (f"{prediction.origin.name} -> {prediction.target.name}: step GPU busy {busy0:.3f} -> {busy:.3f} ms, "
            f"span {span0:.3f} -> {span:.3f} ms; wrote {path}")

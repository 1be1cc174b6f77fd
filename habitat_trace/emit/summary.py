"""One-line summary of a scaled trace: origin -> target, mean per-step GPU busy time and span."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from habitat_trace.emit.replay import Timeline
from habitat_trace.ingest import schema as S
from habitat_trace.scale.prediction import Prediction
from habitat_trace.summary import step_figures


def step_means_ms(trace: Any, timeline: Timeline | None) -> tuple[float, float]:
    """Mean per-step GPU busy time and GPU span (ms), on the origin (timeline None) or the target."""
    gpu = trace.gpu
    if timeline is not None:
        gpu = gpu.assign(**{S.TS: timeline.gpu_start_ns, S.END: timeline.gpu_end_ns})
    fig = step_figures(trace.steps, gpu)
    return fig.mean_ms("gpu_busy_ns"), fig.mean_ms("gpu_span_ns")


def describe(trace: Any, timeline: Timeline, prediction: Prediction, path: Path) -> str:
    busy0, span0 = step_means_ms(trace, None)
    busy, span = step_means_ms(trace, timeline)
    return (f"{prediction.origin.name} -> {prediction.target.name}: step GPU busy {busy0:.3f} -> {busy:.3f} ms, "
            f"span {span0:.3f} -> {span:.3f} ms; wrote {path}")

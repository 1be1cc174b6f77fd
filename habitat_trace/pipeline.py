"""One path from a loaded trace to its prediction on a target GPU, shared by every command, the API and the hook.

Contract: ``resolve_origin(tables, catalog, origin)`` is the one rule for which GPU recorded a trace;
``scale(tables, origin, target)`` predicts every GPU event's duration (scale/) and replays the timeline
(timeline/) once, returning a ``Scaled``; ``iteration_figures(scaled)`` gives the step figures that compare,
explain and the scale command's summary line report. Nothing here reads JSON, prints or writes files.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from habitat_trace.timeline.steps import StepFigures, replayed_step_figures
from habitat_trace.errors import SpecError
from habitat_trace.ingest.trace import Trace as Tables
from habitat_trace.scale.engine import predict
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.prediction import Prediction
from habitat_trace.scale.specs import Catalog
from habitat_trace.timeline.replay import Timeline, replay


@dataclass(frozen=True)
class Scaled:
    """A trace's prediction on one target: the origin tables, the per-event prediction and the replayed timeline."""

    tables: Tables
    prediction: Prediction
    timeline: Timeline

    @property
    def origin(self) -> GpuSpec:
        return self.prediction.origin

    @property
    def target(self) -> GpuSpec:
        return self.prediction.target

    def step_figures(self) -> StepFigures:
        return replayed_step_figures(self.tables, self.timeline)


def catalog_gpu(catalog: Catalog, device_name: Optional[str]) -> Optional[GpuSpec]:
    """The catalog GPU of a deviceProperties name: the name torch reports, or a catalog name (the traces that
    ``scale`` writes name their target by its catalog name, so an output can be scaled again)."""
    if not device_name:
        return None
    return catalog.for_device(device_name) or catalog.get(device_name)


def resolve_origin(tables: Tables, catalog: Catalog, origin: Optional[str]) -> GpuSpec:
    """The GPU the trace was recorded on: ``origin`` (``--from``) when given, else its deviceProperties name."""
    if origin:
        return catalog.resolve(origin)
    spec = catalog_gpu(catalog, tables.device_name)
    if spec is not None:
        return spec
    if not tables.device_name:
        raise SpecError(f"{tables.path}: the trace names no GPU (no deviceProperties); "
                        "name the origin GPU with --from GPU (see `habitat-trace gpus`)")
    raise SpecError(f"{tables.path}: origin GPU {tables.device_name!r} is not in the catalog; "
                    "name it with --from GPU (see `habitat-trace gpus`)")


def scale(tables: Tables, origin: GpuSpec, target: GpuSpec) -> Scaled:
    """Predict every GPU event's duration on ``target`` and replay the timeline with them."""
    prediction = predict(tables, origin, target)
    return Scaled(tables, prediction, replay(tables, prediction))


def iteration_figures(tables: Tables, timeline: Timeline) -> tuple[float, float]:
    """(iteration_ms, gpu_busy_ms) on a replayed timeline, means over the ProfilerSteps.

    iteration = max(the replayed ProfilerStep span, the replayed GPU busy time of the step): the replayed CPU
    span keeps a launch-bound step launch-bound (its blocking calls end when the GPU work ends on the target);
    the busy time covers a step without a blocking call, whose launch queue grows until the GPU's pace sets
    the period. Without ProfilerSteps the whole trace is one step (its replayed GPU span).
    """
    fig = replayed_step_figures(tables, timeline).table
    cpu_ns = (fig["cpu_ns"] if len(tables.steps) else fig["gpu_span_ns"]).to_numpy().astype(np.float64)
    busy_ns = fig["gpu_busy_ns"].to_numpy().astype(np.float64)
    return float(np.maximum(cpu_ns, busy_ns).mean()) / 1e6, float(busy_ns.mean()) / 1e6

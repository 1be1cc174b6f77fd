"""One path from a loaded trace to its prediction on a target GPU, shared by every command, the API and the hook.

Contract: ``resolve_origin(tables, catalog, origin)`` is the one rule for which GPU recorded a trace;
``scale(tables, origin, target, host)`` predicts every GPU event's duration (scale/) and replays the timeline
(timeline/) once on the target host's CPU clock (``host_clock``: the profiler's overhead removed, a what-if host
speed), returning a ``Scaled``; ``iteration_figures(tables, timeline)`` gives the step figures that compare,
explain and the scale command's summary line report. Nothing here reads JSON, prints or writes files.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
import pandas as pd

from habitat_trace.timeline.steps import StepFigures, replayed_step_figures, step_figures
from habitat_trace.errors import SpecError
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.trace import Trace as Tables
from habitat_trace.scale.engine import predict
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.prediction import Prediction
from habitat_trace.scale.specs import Catalog
from habitat_trace.timeline import overhead
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.replay import Timeline, replay

# Calibration to a measured un-profiled step (our hook's habitat_unprofiled_step_ns): the model's costs are scaled
# by at most this factor either way; beyond it the measurement (a hiccup, a cold first step) is not trusted over
# the model, whose held-out error is ~15% (benchmarks/results/profiler_overhead/model.md).
MAX_CALIBRATION = 3.0
# A measured step this much above the step's GPU busy time is set by the CPU, so it measures the host's pace;
# below it the GPU sets the pace and the measurement only bounds the host's time from above.
CPU_BOUND_MARGIN = 1.05
# Replays to find the launch back-pressure: each round adds the delays the previous replay shows; three reach the
# fixed point on the shared traces scaled to a T4 (the slowest catalog target: the most queueing).
MAX_QUEUE_ROUNDS = 3


@dataclass(frozen=True)
class Host:
    """The host the target GPU runs with: the origin's host without the profiler (``keep_profiler_overhead``
    False), at ``cpu_speed`` times its speed (a what-if: 1.2 = a host 20% faster)."""

    cpu_speed: float = 1.0
    keep_profiler_overhead: bool = False


@dataclass(frozen=True)
class HostClock:
    """The clock a replay runs the CPU on, and what it rests on (for inspect/explain and the written header)."""

    clock: CpuClock
    overhead_per_step_ns: np.ndarray  # removed from each ProfilerStep (before the speed-up)
    measured_step_ns: Optional[float] = None  # the origin's un-profiled step, when the trace carries it
    calibration: float = 1.0  # the factor the overhead model's costs were scaled by to meet it
    evidence: Optional[overhead.Evidence] = None
    warnings: tuple[str, ...] = field(default=())
    removed_before: bool = False  # the trace is one we wrote with the overhead already removed


@dataclass(frozen=True)
class Scaled:
    """A trace's prediction on one target: the origin tables, the per-event prediction and the replayed timeline."""

    tables: Tables
    prediction: Prediction
    timeline: Timeline
    host: HostClock

    @property
    def origin(self) -> GpuSpec:
        return self.prediction.origin

    @property
    def target(self) -> GpuSpec:
        return self.prediction.target

    def step_figures(self) -> StepFigures:
        return replayed_step_figures(self.tables, self.timeline)

    def record(self) -> dict[str, object]:
        """What the written trace's ``habitat_trace`` header says of the host (so that scaling the output again
        does not remove the profiler's overhead twice)."""
        hc = self.host
        per_step = hc.overhead_per_step_ns
        return {"host": {
            "profiler_overhead_removed": len(hc.clock.at_ns) > 0 or hc.removed_before,
            "profiler_overhead_ms_per_step": float(np.mean(per_step)) / 1e6 if len(per_step) else 0.0,
            "cpu_speed": hc.clock.speed,
            "measured_unprofiled_step_ms": None if hc.measured_step_ns is None else hc.measured_step_ns / 1e6,
            "calibration": hc.calibration,
        }}


def catalog_gpu(catalog: Catalog, device_name: Optional[str]) -> Optional[GpuSpec]:
    """The catalog GPU of a deviceProperties name: the name torch reports, or a catalog name (the traces that
    ``scale`` writes name their target by its catalog name, so an output can be scaled again)."""
    if not device_name:
        return None
    return catalog.for_device(device_name) or catalog.get(device_name)


def resolve_origin(tables: Tables, catalog: Catalog, origin: Optional[str]) -> GpuSpec:
    """The GPU the trace was recorded on: ``origin`` (``--from``) when given, else its deviceProperties name, else
    (ROCm's generic "AMD Radeon Graphics") its CU count, memory and GFXIP (Catalog.for_properties)."""
    if origin:
        return catalog.resolve(origin)
    spec = catalog_gpu(catalog, tables.device_name)
    if spec is None and tables.device_properties:
        spec = catalog.for_properties(tables.device_properties)
    if spec is not None:
        return spec
    if not tables.device_name:
        raise SpecError(f"{tables.path}: the trace names no GPU (no deviceProperties); "
                        "name the origin GPU with --from GPU (see `habitat-trace gpus`)")
    raise SpecError(f"{tables.path}: origin GPU {tables.device_name!r} is not in the catalog; "
                    "name it with --from GPU (see `habitat-trace gpus`)")


def measured_step_ns(tables: Tables) -> Optional[float]:
    """The origin's un-profiled step time (median, ns) when the trace carries it (habitat_trace.schedule), else None."""
    values = tables.meta.get(S.UNPROFILED_STEP_KEY)
    if not isinstance(values, list):
        return None
    ok = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    return float(np.median(ok)) if ok else None


def host_clock(tables: Tables, host: Host = Host()) -> HostClock:
    """The target host's CPU clock for ``tables``: the overhead model's estimate (timeline/overhead.py) on one time
    line for all threads, scaled to the measured un-profiled step when the trace carries one, at ``host``'s speed."""
    measured = measured_step_ns(tables)
    timed = tables.event_ts_ns[tables.event_ts_ns != NO_TIME]
    start = int(tables.steps[S.TS].min()) if len(tables.steps) else int(timed.min(initial=0))
    removed_before = overhead_removed(tables)
    if host.keep_profiler_overhead or removed_before:
        empty = np.zeros(0, dtype=np.int64)
        return HostClock(CpuClock.from_knots(empty, empty, start, host.cpu_speed),
                         np.zeros(len(tables.steps), dtype=np.int64), measured, removed_before=removed_before)
    est = overhead.estimate(tables, one_clock=True)
    factor = 1.0
    if measured is not None and len(tables.steps):
        factor = _calibration(tables, est, measured)
        if factor != 1.0:
            est = overhead.estimate(tables, one_clock=True, scale=factor)
    starts, cum = est.knots(0)
    return HostClock(CpuClock.from_knots(starts, cum, start, host.cpu_speed), est.per_step_ns, measured, factor,
                     est.evidence, est.warnings)


def overhead_removed(tables: Tables) -> bool:
    """True for a trace habitat-trace wrote with the profiler's overhead already removed (Scaled.record)."""
    block = tables.meta.get("habitat_trace")
    host = block.get("host") if isinstance(block, dict) else None
    return isinstance(host, dict) and host.get("profiler_overhead_removed") is True


def _calibration(tables: Tables, est: overhead.OverheadEstimate, measured_ns: float) -> float:
    """The factor on the model's costs that makes the mean un-profiled CPU step meet ``measured_ns``: when the
    measured step is CPU-bound (CPU_BOUND_MARGIN over the GPU busy time), removed = profiled - measured; else the
    host's step is at most the measurement, so the factor only grows until it is. Within 1/MAX..MAX."""
    profiled = float(tables.steps[S.DUR].mean())
    removed = float(np.mean(est.per_step_ns))
    busy = float(step_figures(tables.steps, tables.gpu).table["gpu_busy_ns"].mean())
    want = profiled - measured_ns
    if removed <= 0 or (measured_ns <= CPU_BOUND_MARGIN * busy and removed >= want):
        return 1.0
    if want <= 0:
        return 1.0 / MAX_CALIBRATION
    return float(np.clip(want / removed, 1.0 / MAX_CALIBRATION, MAX_CALIBRATION))


def scale(tables: Tables, origin: GpuSpec, target: GpuSpec, host: Host = Host(),
          clock: Optional[HostClock] = None) -> Scaled:
    """Predict every GPU event's duration on ``target`` and replay the timeline with them on the target host's
    clock (``clock``: one host_clock already built for these tables and ``host``, shared between targets)."""
    prediction = predict(tables, origin, target)
    hc = clock or host_clock(tables, host)
    cpu = hc.clock
    timeline = replay(tables, prediction, cpu)
    for _ in range(MAX_QUEUE_ROUNDS):  # launch back-pressure: a fixed point from below, in a few rounds
        at, delay = _queue_delays(tables, timeline)
        if not len(at):
            break
        cpu = cpu.delayed(at, delay)
        timeline = replay(tables, prediction, cpu)
    return Scaled(tables, prediction, timeline, hc if cpu is hc.clock else replace(hc, clock=cpu))


def _queue_delays(tables: Tables, timeline: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """(origin end of each launch call that a full launch queue would block, the host time it adds) on the
    replayed ``timeline`` (overhead.queue_delay_ns: a launch waits while its stream holds LAUNCH_QUEUE_DEPTH
    pending launches; the host carries the delay). Empty when no queue fills."""
    g, calls = tables.gpu, tables.calls
    launch = g[S.LAUNCH].to_numpy()
    has = launch >= 0
    # one queue entry per launch call (a CUDA-graph launch runs many kernels): its first row's stream, and the
    # slot frees when its last kernel ends
    calls_used, first = np.unique(launch[has], return_index=True)
    if len(calls_used) <= overhead.LAUNCH_QUEUE_DEPTH:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(has)[first]
    end = pd.Series(timeline.gpu_end_ns[has]).groupby(launch[has]).max().reindex(calls_used).to_numpy()
    call_ev = calls[S.EVENT].to_numpy()[calls_used]
    issued = timeline.ts_ns[call_ev] + timeline.dur_ns[call_ev]  # the launch call's replayed return
    order = np.argsort(issued, kind="stable")
    rows, issued, end, used = rows[order], issued[order], end[order], calls_used[order]
    stream = (g[S.DEVICE].to_numpy()[rows] << 32) + g[S.STREAM].to_numpy()[rows]
    total = overhead.queue_delay_ns(issued, end, stream)
    steps = np.diff(total, prepend=0)  # total is non-decreasing: the host carries each delay forward
    hit = np.flatnonzero(steps > 0)
    return calls[S.END].to_numpy()[used[hit]], steps[hit]


def headline(scaled: Scaled) -> tuple[float, float, str]:
    """(iteration_ms, gpu_busy_ms, source): the figures compare, explain and the scale command lead with. On the
    origin (same GPU) a trace that carries its measured un-profiled step time is never contradicted: the
    iteration is max(that, the GPU busy time), source "measured"; otherwise the replay's, source "predicted"."""
    it, busy = iteration_figures(scaled.tables, scaled.timeline)
    measured = scaled.host.measured_step_ns
    if measured is not None and scaled.prediction.facts is None and scaled.origin == scaled.target:
        return max(measured / 1e6, busy), busy, "measured"
    return it, busy, "predicted"


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

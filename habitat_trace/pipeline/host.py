"""The host a replay runs its CPU side on: the origin's host without the profiler's overhead (timeline/overhead.py),
scaled to the measured un-profiled step when the trace carries one, at a what-if speed.

Contract: ``host_clock(tables, Host(...)) -> HostClock`` is built once per trace and shared by every target;
``host_record(clock)`` is what a written trace's header says of it (so that scaling an output again does not
remove the profiler's overhead twice). Nothing here reads JSON, prints or writes files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.trace import Tables
from habitat_trace.timeline import overhead
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.steps import step_figures

# Calibration to a measured un-profiled step (our hook's habitat_unprofiled_step_ns): the model's costs are scaled
# by at most this factor either way; beyond it the measurement (a hiccup, a cold first step) is not trusted over
# the model, whose held-out error is ~15% (benchmarks/results/profiler_overhead/model.md).
MAX_CALIBRATION = 3.0
# A measured step this much above the step's GPU busy time is set by the CPU, so it measures the host's pace;
# below it the GPU sets the pace and the measurement only bounds the host's time from above.
CPU_BOUND_MARGIN = 1.05


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


def host_record(hc: HostClock) -> dict[str, object]:
    """What the written trace's ``habitat_trace`` header says of the host (so that scaling the output again does
    not remove the profiler's overhead twice)."""
    return {"host": {
        "profiler_overhead_removed": len(hc.clock.at_ns) > 0 or hc.removed_before,
        "profiler_overhead_ms_per_step": overhead_ms(hc),
        "cpu_speed": hc.clock.speed,
        "measured_unprofiled_step_ms": None if hc.measured_step_ns is None else hc.measured_step_ns / 1e6,
        "calibration": hc.calibration,
    }}


def overhead_ms(hc: HostClock) -> float:
    """The profiler's host overhead per step removed from the replay (0 when kept), in ms."""
    per_step = hc.overhead_per_step_ns
    return float(np.mean(per_step)) / 1e6 if len(per_step) else 0.0


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
    """True for a trace habitat-trace wrote with the profiler's overhead already removed (host_record)."""
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

"""The host a replay runs its CPU side on: the origin's host without the profiler's overhead (timeline/overhead.py),
scaled to a measured un-profiled step (the user's, ``Host.measured_step_ms``, else the one our hook's trace
carries), at a what-if speed.

Contract: ``host_clock(tables, Host(...)) -> HostClock`` is built once per trace and shared by every target;
``host_record(clock)`` is what a written trace's header says of it (so that scaling an output again does not
remove the profiler's overhead twice); ``step_ms(text)`` reads a step time given as ms or it/s. Nothing here reads
JSON, prints or writes files.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import math
import re

import numpy as np

from habitat_trace.errors import HabitatTraceError
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.trace import Tables
from habitat_trace.pipeline.figures import CPU_BOUND_MARGIN, steady_steps, step_busy_ns
from habitat_trace.timeline import hostband, overhead
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.joint import recorded_blocks

# Calibration to a measured un-profiled step (our hook's habitat_unprofiled_step_ns): the model's costs are scaled
# by at most this factor either way; beyond it the measurement (a hiccup, a cold first step) is not trusted over
# the model, whose held-out error is ~15% (benchmarks/results/profiler_overhead/model.md).
MAX_CALIBRATION = 3.0
# What the scaled costs leave between the clock's de-profiled step and the measured one (the 1/MAX..MAX limit, a
# step the model cannot shorten further, a trace without ProfilerSteps) is closed by the clock's pace (issue 35);
# a mismatch within this share is left alone (a hook-recorded trace's clock then stays as it was).
PACE_TOLERANCE = 0.02

# Where the measured un-profiled step a clock is calibrated to comes from (HostClock.measured_source).
MEASURED_IN_TRACE = "measured"  # the wait steps our hook timed (habitat_trace.schedule)
GIVEN_BY_USER = "given"  # Host.measured_step_ms: the user's own measurement (--measured-step)
STEP_OPTION = "--measured-step"
STEP_HELP = "give your real step time in ms (e.g. 3.1 or 3.1ms) or iterations per second (e.g. 320it/s)"
_STEP = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|it/s|)\s*$")


@dataclass(frozen=True)
class Host:
    """The host the target GPU runs with: the origin's host without the profiler (``keep_profiler_overhead``
    False), at ``cpu_speed`` times its speed (a what-if: 1.2 = a host 20% faster). ``measured_step_ms``: the origin's
    real step time, as the user measured it without the profiler (a training log's; ``step_ms`` reads "3.1ms" or
    "320it/s"): the origin row is then exactly it and every target's host clock is calibrated to it."""

    cpu_speed: float = 1.0
    keep_profiler_overhead: bool = False
    measured_step_ms: Optional[float] = None

    def __post_init__(self) -> None:
        v = self.measured_step_ms
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                              or v <= 0):
            raise HabitatTraceError(f"{STEP_OPTION} {v!r}: {STEP_HELP}")
        if v is not None and self.keep_profiler_overhead:
            raise HabitatTraceError(f"{STEP_OPTION} and --keep-profiler-overhead: the step you measured ran without "
                                    "the profiler; drop one of them")


def step_ms(text: str | float | None) -> Optional[float]:
    """A step time as ms from "3.1", "3.1ms" or "320it/s" (1000 / it/s); None stays None; anything else is one
    error line naming --measured-step and the fix."""
    if text is None or isinstance(text, (int, float)) and not isinstance(text, bool):
        return None if text is None else float(text)
    m = _STEP.match(str(text))
    value = float(m.group(1)) if m else float("nan")
    if not m or not math.isfinite(value) or value <= 0:
        raise HabitatTraceError(f"{STEP_OPTION} {text!r}: {STEP_HELP}")
    return 1000.0 / value if m.group(2) == "it/s" else value


@dataclass(frozen=True)
class HostClock:
    """The clock a replay runs the CPU on, and what it rests on (for inspect/explain and the written header)."""

    clock: CpuClock
    overhead_per_step_ns: np.ndarray  # removed from each ProfilerStep (before the speed-up)
    measured_step_ns: Optional[float] = None  # the origin's un-profiled step: the user's, else the trace's
    calibration: float = 1.0  # the factor the overhead model's costs were scaled by to meet it
    evidence: Optional[overhead.Evidence] = None
    warnings: tuple[str, ...] = field(default=())
    removed_before: bool = False  # the trace is one we wrote with the overhead already removed
    measured_source: Optional[str] = None  # MEASURED_IN_TRACE or GIVEN_BY_USER when measured_step_ns is set
    pace: float = 1.0  # the clock's speed-up (within cpu_speed) that closes what the scaled costs left (_pace)


def host_record(hc: HostClock) -> dict[str, object]:
    """What the written trace's ``habitat_trace`` header says of the host (so that scaling the output again does
    not remove the profiler's overhead twice)."""
    return {"host": {
        "profiler_overhead_removed": float(np.sum(hc.overhead_per_step_ns)) > 0 or hc.removed_before,
        "profiler_overhead_ms_per_step": overhead_ms(hc),
        "cpu_speed": hc.clock.speed,
        "measured_unprofiled_step_ms": None if hc.measured_step_ns is None else hc.measured_step_ns / 1e6,
        "measured_source": hc.measured_source, "calibration": hc.calibration, "pace": hc.pace,
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


def host_clock(tables: Tables, host: Host = Host(), calibrate: bool = True) -> HostClock:
    """The target host's CPU clock for ``tables``: the overhead model's estimate (timeline/overhead.py) on one time
    line for all threads, calibrated to a measured un-profiled step (the user's, else the one the trace carries:
    the costs scaled, then the pace, ``_pace``), at ``host``'s speed. ``calibrate=False``: the model's own clock,
    the measured step only recorded (pipeline.run.Rank.clock replays it before calibrating)."""
    given = host.measured_step_ms
    measured = given * 1e6 if given is not None else measured_step_ns(tables)
    source = None if measured is None else GIVEN_BY_USER if given is not None else MEASURED_IN_TRACE
    timed = tables.event_ts_ns[tables.event_ts_ns != NO_TIME]
    start = int(tables.steps[S.TS].min()) if len(tables.steps) else int(timed.min(initial=0))
    removed_before = overhead_removed(tables)
    empty = np.zeros(0, dtype=np.int64)
    if host.keep_profiler_overhead or removed_before:
        clock = CpuClock.from_knots(empty, empty, start, host.cpu_speed)
        pace = 1.0 if measured is None else _pace(tables, clock, measured)
        clock = _unblocked(clock, tables)
        return HostClock(replace(clock, speed=host.cpu_speed * pace), np.zeros(len(tables.steps), dtype=np.int64),
                         measured, removed_before=removed_before, measured_source=source, pace=pace)
    est = overhead.estimate(tables, one_clock=True)
    factor = 1.0
    if calibrate and measured is not None and len(tables.steps):
        factor = _calibration(tables, est, measured)
        if factor != 1.0:
            est = overhead.estimate(tables, one_clock=True, scale=factor)
    clock = CpuClock.from_knots(*est.knots(0), start, host.cpu_speed)
    pace = 1.0 if measured is None or not calibrate else _pace(tables, clock, measured)
    given_ns = measured if source == GIVEN_BY_USER else None
    warnings = est.warnings + (_given_warnings(tables, est, given_ns, factor) if given_ns is not None else ())
    clock = _unblocked(clock, tables)
    return HostClock(replace(clock, speed=host.cpu_speed * pace), est.per_step_ns, measured, factor, est.evidence,
                     warnings, measured_source=source, pace=pace)


def _unblocked(clock: CpuClock, tables: Tables) -> CpuClock:
    """``clock`` with the recording's waits on a full launch queue taken out (timeline/joint.recorded_blocks: the
    origin GPU's pace, which the replay's back-pressure puts back at the target's)."""
    return clock.without(*recorded_blocks(tables))


def _pace(tables: Tables, clock: CpuClock, measured_ns: float) -> float:
    """The speed-up of ``clock`` (at speed 1) that brings the origin's de-profiled step, as the iteration rule reads
    it (pipeline.figures), to ``measured_ns``: the mean steady ProfilerStep span less the removal in it; without
    ProfilerSteps the whole trace is the step and its iteration the GPU span, which follows the host from the first
    kernel launch to the last. A CPU-bound measurement (CPU_BOUND_MARGIN over the GPU busy time) fixes the pace;
    below it the GPU sets the step, and the host is only at least as fast as the measurement. 1.0 within
    PACE_TOLERANCE."""
    launches = tables.calls.loc[tables.calls[S.NAME].isin(overhead.LAUNCH_CALLS)]
    if len(tables.steps):
        keep = steady_steps(tables)
        a, b = (tables.steps[k].to_numpy(dtype=np.int64)[keep] for k in (S.TS, S.END))
    elif len(launches):
        a, b = (np.array([launches[S.TS].min()], np.int64), np.array([launches[S.END].max()], np.int64))
    else:
        return 1.0
    deprofiled = float(np.mean((b - a) - (clock.removed_ns(b) - clock.removed_ns(a))))
    busy = step_busy_ns(tables)
    busy_ns = float(np.mean(busy[keep] if len(tables.steps) else busy))
    pace = deprofiled / measured_ns
    if measured_ns <= CPU_BOUND_MARGIN * busy_ns:
        pace = max(pace, 1.0)
    return pace if deprofiled > 0 and abs(pace - 1.0) > PACE_TOLERANCE else 1.0


def _given_warnings(tables: Tables, est: overhead.OverheadEstimate, given_ns: float, factor: float
                    ) -> tuple[str, ...]:
    """What a user's step contradicts in the trace: a step shorter than the trace proves of its steady steps (beyond
    a measured loop's own noise, hostband.MEASURED_FAST), and a calibration stopped at its 1/MAX..MAX limit (the
    targets' host then misses the step given)."""
    out = []
    if est.floor is not None and len(tables.steps):
        proven = float(np.mean(est.floor.step_ns[steady_steps(tables)]))
        if given_ns < hostband.MEASURED_FAST * proven:
            out.append(f"{STEP_OPTION} {given_ns / 1e6:.2f} ms is below what the trace proves of its step "
                       f"({proven / 1e6:.2f} ms: GPU work, launch calls, syncs): was it recorded with another model, "
                       "batch or GPU? The origin row shows the step given")
    if factor in (MAX_CALIBRATION, 1.0 / MAX_CALIBRATION):
        out.append(f"{STEP_OPTION} {given_ns / 1e6:.2f} ms: the profiler-overhead estimate was scaled by {factor:.2f}, "
                   f"its limit (1/{MAX_CALIBRATION:g}..{MAX_CALIBRATION:g}); the targets' host misses the step given")
    return tuple(out)


def overhead_removed(tables: Tables) -> bool:
    """True for a trace habitat-trace wrote with the profiler's overhead already removed (host_record)."""
    block = tables.meta.get("habitat_trace")
    host = block.get("host") if isinstance(block, dict) else None
    return isinstance(host, dict) and host.get("profiler_overhead_removed") is True


def _calibration(tables: Tables, est: overhead.OverheadEstimate, measured_ns: float) -> float:
    """The factor on the model's costs that makes the mean un-profiled CPU step meet ``measured_ns``: when the
    measured step is CPU-bound (CPU_BOUND_MARGIN over the GPU busy time), removed = profiled - measured; else the
    host's step is at most the measurement, so the factor only grows until it is. Within 1/MAX..MAX. Over the
    steady steps (pipeline.figures.steady_steps)."""
    keep = steady_steps(tables)
    profiled = float(tables.steps[S.DUR].to_numpy()[keep].mean())
    removed = float(np.mean(est.per_step_ns[keep]))
    busy = float(step_busy_ns(tables)[keep].mean())
    want = profiled - measured_ns
    if removed <= 0 or (measured_ns <= CPU_BOUND_MARGIN * busy and removed >= want):
        return 1.0
    if want <= 0:
        return 1.0 / MAX_CALIBRATION
    return float(np.clip(want / removed, 1.0 / MAX_CALIBRATION, MAX_CALIBRATION))

"""The range of an iteration time that the profiler-overhead model's measured error leaves, for any replay.

``host_band(clock, evidence, measured)`` gives the clocks of the fastest and the slowest host the trace is
consistent with: the central host clock (pipeline.host_clock: the overhead removed, at the user's host speed) run
PACE_FAST / PACE_SLOW times the de-profiled pace (overhead.py: the model's held-out error on the calibration runs);
when the trace's host unit u lies outside the calibrated hosts' the slowest is the profiled host itself (nothing
removed); when the trace carries its measured un-profiled step (our hook) the factors are the loop's own
measurement noise (MEASURED_FAST, MEASURED_SLOW). A replay's values on both clocks (pipeline.Run replays
every rank on them jointly) give its range by ``ends_range``; the same host clock serves every target, so the
origin's and the targets' ranges come from one band. ``value_range`` is the same band around a measured figure.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Optional

import numpy as np

from habitat_trace.timeline import overhead
from habitat_trace.timeline.cpuclock import CpuClock

# Two measurements of one un-profiled loop in one process (median of CUDA-event-timed steps vs the steady
# back-to-back wall time, 24 workload x host runs of benchmarks/results/profiler_overhead, variant "none"): their
# ratio's 5% and 95% quantiles (benchmarks/overhead_eval.py "band": 0.887, 1.237), rounded outward. A measured step
# is known to this noise.
MEASURED_FAST = 0.88
MEASURED_SLOW = 1.24


@dataclass(frozen=True)
class HostBand:
    """The fastest and slowest host clocks the trace is consistent with, and their pace factors on the central one
    (``fast`` <= 1 <= ``slow``: multiply a de-profiled host time to get the band's ends)."""

    fast: CpuClock
    slow: CpuClock
    fast_factor: float
    slow_factor: float
    source: str  # "model": the overhead model's error; "measured": the hook's measurement; "none": no band

    @property
    def is_point(self) -> bool:
        return self.fast_factor == self.slow_factor == 1.0


def host_band(clock: CpuClock, evidence: Optional[overhead.Evidence], measured: bool = False) -> HostBand:
    """The band around ``clock`` (module doc). ``evidence`` None: the clock removes nothing the model estimated
    (``--keep-profiler-overhead``, or an output whose overhead was already removed): a point band."""
    if evidence is None:
        return HostBand(clock, clock, 1.0, 1.0, "none")
    fast, slow = (MEASURED_FAST, MEASURED_SLOW) if measured else (overhead.PACE_FAST, overhead.PACE_SLOW)
    slow_clock = replace(clock, speed=clock.speed / slow)
    if evidence.extrapolated and not measured:  # the slowest host consistent with the trace: the profiled one
        empty = np.zeros(0, dtype=np.int64)
        slow_clock = replace(clock, at_ns=empty, cum_ns=empty)
    return HostBand(replace(clock, speed=clock.speed / fast), slow_clock, fast, slow,
                    "measured" if measured else "model")


def slowest_of(band: HostBand, ranks: int) -> HostBand:
    """The band of a step that waits for the slowest of ``ranks`` hosts (a data-parallel step: every collective
    waits for the last rank): each rank's pace an independent draw from the band's distribution, lognormal with the
    band's factors as its 5% and 95% quantiles (overhead.PACE_QUANTILES), the slow end is the 95% quantile of the
    largest of ``ranks`` draws, z = Phi^-1(0.95 ** (1 / ranks)) standard deviations up. Independent draws are the
    widest case (ranks on one host share some of its pace); the fast end stays. One rank: the band itself."""
    if ranks <= 1 or band.is_point or band.slow_factor <= band.fast_factor:
        return band
    z95 = float(NormalDist().inv_cdf(overhead.PACE_QUANTILES[1]))
    lo, hi = np.log(band.fast_factor), np.log(band.slow_factor)
    mu, sigma = (lo + hi) / 2.0, (hi - lo) / (2.0 * z95)
    factor = float(np.exp(mu + NormalDist().inv_cdf(overhead.PACE_QUANTILES[1] ** (1.0 / ranks)) * sigma))
    slow = replace(band.slow, speed=band.slow.speed * band.slow_factor / factor)
    return replace(band, slow=slow, slow_factor=factor)


def ends_range(fast: float, slow: float, central: float, floor: float = 0.0) -> tuple[float, float]:
    """(low, high) from a replay's values on the band's fast and slow clocks: never below ``floor`` (what the trace
    proves, same unit) and containing ``central`` (the value on the band's central clock) whenever that is not below
    the floor (a replay is monotone in its host's times up to back-pressure rounding)."""
    return max(min(fast, slow, central), floor), max(fast, slow, central, floor)


def value_range(value: float, band: HostBand, floor: float = 0.0) -> tuple[float, float]:
    """The band around a measured or already de-profiled host figure ``value`` (its factors), never below ``floor``."""
    return max(min(value * band.fast_factor, value), floor), max(value * band.slow_factor, value, floor)

"""The range of an iteration time that the trace leaves open, for any replay: the host's pace without the profiler.

``host_band(clock, evidence, measured)`` gives the clocks of the fastest and the slowest host the trace is
consistent with: the central host clock (pipeline.host_clock: the overhead removed, at the user's host speed) run
at 1 / PACE_FAST and 1 / PACE_SLOW of its pace. The range's fast end is the trace's fastest steady step replayed on
the fast clock, its slow end the mean step (the iteration) on the slow clock (pipeline.Run replays every rank on
both, jointly; ``ends_range``): a recording that caught its host slow for a step or two (a stall, a cold first
step) shows it in its other steps. When the trace's host unit u lies outside the calibrated hosts' the slowest is
the profiled host itself (nothing removed); when a measured un-profiled step anchors the clock (our hook's, or the
user's, pipeline.host) the factors are the loop's own measurement noise (MEASURED_FAST, MEASURED_SLOW), around the
iteration at both ends (a measured step is a mean). The same
host clock serves every target, so the origin's and the targets' ranges come from one band. ``value_range`` is
the same band around a measured figure.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Optional

import numpy as np

from habitat_trace.timeline import overhead
from habitat_trace.timeline.cpuclock import CpuClock

# The pace factors of a trace nothing anchors (issue 35): a split-conformal prediction interval (Lei, G'Sell,
# Rinaldo, Tibshirani and Wasserman, JASA 2018) of the origin row itself, not of the overhead model's issue-time
# error: over the launch-bound origin rows of the dev traces with a measured real loop (the overhead calibration's 24
# traces, ../shared incl. its no-record_shapes twins, benchmarks/traces; 55 rows), the real loop over the fastest
# de-profiled steady step and over the mean one (benchmarks/range_eval.py "band"), the 5% order statistic of the
# first (0.757) and the 95% of the second (1.448), rounded outward: each end misses at most 5% of such traces. Held
# out, never fitted: docs/accuracy.md "The origin row and its range". Re-derived after disturbed steps were left out
# of the step figures (pipeline.figures.steady_steps, 2026-11-27): 0.757 and 1.535; kept, since with these factors
# the held-out rows' coverage stayed 94.4% of 126 (docs/accuracy.md "Disturbed steps").
PACE_FAST = 0.75
PACE_SLOW = 1.45
PACE_QUANTILES = (0.05, 0.95)  # the order statistics PACE_FAST and PACE_SLOW are
# A data-parallel step synthesized from a one-GPU trace (--world-size N): the same kind of split-conformal interval
# of the row itself, the measured N-rank step over the central prediction, 5% and 95% order statistics over the 91
# rows (9 workloads x DDP/FSDP2/FSDP1 x 2 and 4 ranks, four H100 host sessions of 2 and 4 GPUs, 2026-11-26) of
# benchmarks/scaleout_eval.py --band (0.795, 1.695), rounded outward; refitted without each workload in turn, the
# band alone held 81 of 91 (89%). Built on the first two hosts' 57 rows (0.73-1.64), the range held 30 of the 34 rows of
# the next two sessions (88%). Its range is the union of this and the host band's replays.
SCALEOUT_FAST = 0.79
SCALEOUT_SLOW = 1.70
# The joint replay of a run's rank traces (compare DIR): the same interval over the same 91 runs' measured step over
# the slowest rank's joint replay (0.631, 1.163; refitted without each workload, the band alone held 81 of 91),
# rounded outward. Built on the first 57 rows (0.62-1.33), the range held 34 of the next 34.
JOINT_FAST = 0.63
JOINT_SLOW = 1.17
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
    source: str  # "model": nothing anchors the trace; "measured"/"given": a measured step does; "none": no band

    @property
    def is_point(self) -> bool:
        return self.fast_factor == self.slow_factor == 1.0


def host_band(clock: CpuClock, evidence: Optional[overhead.Evidence], measured: Optional[str] = None) -> HostBand:
    """The band around ``clock`` (module doc). ``evidence`` None: the clock removes nothing the model estimated
    (``--keep-profiler-overhead``, or an output whose overhead was already removed): a point band. ``measured``:
    where the measured step the clock is calibrated to comes from (pipeline.host: "measured", "given"), the band's
    source; None: nothing anchors the clock ("model")."""
    if evidence is None:
        return HostBand(clock, clock, 1.0, 1.0, "none")
    fast, slow = (MEASURED_FAST, MEASURED_SLOW) if measured else (PACE_FAST, PACE_SLOW)
    slow_clock = replace(clock, speed=clock.speed / slow)
    if evidence.extrapolated and not measured:  # the slowest host consistent with the trace: the profiled one
        empty = np.zeros(0, dtype=np.int64)
        slow_clock = replace(clock, at_ns=empty, cum_ns=empty)
    return HostBand(replace(clock, speed=clock.speed / fast), slow_clock, fast, slow, measured or "model")


def slowest_of(band: HostBand, ranks: int) -> HostBand:
    """The band of a step that waits for the slowest of ``ranks`` hosts (a data-parallel step: every collective
    waits for the last rank): each rank's pace an independent draw from the band's distribution, lognormal with the
    band's factors as its 5% and 95% quantiles (PACE_QUANTILES), the slow end is the 95% quantile of the
    largest of ``ranks`` draws, z = Phi^-1(0.95 ** (1 / ranks)) standard deviations up. Independent draws are the
    widest case (ranks on one host share some of its pace); the fast end stays. One rank: the band itself."""
    if ranks <= 1 or band.is_point or band.slow_factor <= band.fast_factor:
        return band
    z95 = float(NormalDist().inv_cdf(PACE_QUANTILES[1]))
    lo, hi = np.log(band.fast_factor), np.log(band.slow_factor)
    mu, sigma = (lo + hi) / 2.0, (hi - lo) / (2.0 * z95)
    factor = float(np.exp(mu + NormalDist().inv_cdf(PACE_QUANTILES[1] ** (1.0 / ranks)) * sigma))
    slow = replace(band.slow, speed=band.slow.speed * band.slow_factor / factor)
    return replace(band, slow=slow, slow_factor=factor)


def ends_range(fast: float, slow: float, central: float, floor: float = 0.0) -> tuple[float, float]:
    """(low, high) from a replay's values on the band's fast clock (its fastest step) and slow clock (its
    iteration): never below ``floor`` (what the trace proves, same unit) and containing ``central`` (the value on
    the band's central clock) whenever that is not below the floor (a replay is monotone in its host's times up to
    back-pressure rounding)."""
    return max(min(fast, slow, central), floor), max(fast, slow, central, floor)


def value_range(value: float, band: HostBand, floor: float = 0.0) -> tuple[float, float]:
    """The band around a measured or already de-profiled host figure ``value`` (its factors), never below ``floor``."""
    return max(min(value * band.fast_factor, value), floor), max(value * band.slow_factor, value, floor)

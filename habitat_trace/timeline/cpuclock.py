"""``CpuClock``: the target host's CPU time as a monotone function of the trace's (profiled) CPU time.

Two things change the host's pace and nothing else: the profiler's own overhead, which the un-profiled loop does
not pay (removed: C(t), the overhead accrued by time t, from timeline/overhead.py, piecewise linear with slope <= 1
between its knots), and a what-if host speed (``--cpu-speed``: CPU durations divided by it). With t0 the trace's
first CPU time:

    clock(t) = t0 + (t - C(t) - t0) / speed + Q(t)

Q(t) is the host time a full launch queue added before t (back-pressure: a launch blocks while its stream holds
1,021 pending launches, timeline/overhead.queue_delay_ns), a non-decreasing step function of origin time that
timeline/joint.replay_ranks finds by replaying. t - C(t) never decreases (slope of C <= 1), nor does Q, so every thread keeps
its order and nesting. The identity clock (no
overhead, speed 1) maps every time to itself: a replay with it is byte-identical to one without a clock. GPU times
are never mapped: kernels keep their speed under the profiler.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True)
class CpuClock:
    """The map above: C interpolates (``at_ns``, ``cum_ns``) linearly (0 before the first knot, the last value after
    the last); ``at_ns`` sorted, ``cum_ns`` non-decreasing with steps no larger than the knots' spacing."""

    at_ns: np.ndarray
    cum_ns: np.ndarray
    origin_ns: int = 0
    speed: float = 1.0
    delay_at_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # sorted origin times
    delay_cum_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # Q from each time on

    @classmethod
    def identity(cls) -> "CpuClock":
        empty = np.zeros(0, dtype=np.int64)
        return cls(empty, empty)

    @classmethod
    def from_knots(cls, starts_ns: np.ndarray, cum_ns: np.ndarray, origin_ns: int = 0,
                   speed: float = 1.0) -> "CpuClock":
        """From overhead.OverheadEstimate.knots: C is 0 at starts[0] - cum[0] and cum[i] at starts[i]."""
        if not speed > 0:
            raise ValueError(f"CPU speed must be > 0, got {speed}")
        starts, cum = np.asarray(starts_ns, dtype=np.int64), np.asarray(cum_ns, dtype=np.int64)
        if len(starts) == 0 or int(cum[-1]) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty, int(origin_ns), float(speed))
        at = np.concatenate(([starts[0] - cum[0]], starts))
        return cls(at, np.concatenate(([0], cum)), int(origin_ns), float(speed))

    def without(self, at_ns: np.ndarray, removed_ns: np.ndarray) -> "CpuClock":
        """This clock with ``removed_ns[i]`` more host time taken out from origin time ``at_ns[i]`` on (a ramp of
        slope 1 from there: timeline/joint.recorded_blocks' waits on a full launch queue, inside their calls).
        The sum with C keeps t - C(t) non-decreasing (where two removals overlap, the running maximum of t - C(t)
        drops the excess), so every thread keeps its order."""
        at, rem = np.asarray(at_ns, dtype=np.int64), np.maximum(np.asarray(removed_ns, dtype=np.int64), 0)
        if not len(at) or not rem.any():
            return self
        order = np.argsort(at, kind="stable")
        at, rem = at[order], rem[order]
        done = np.cumsum(rem)
        knot_t = np.concatenate((at, at + rem))
        knot_c = np.concatenate((done - rem, done))
        k = np.argsort(knot_t, kind="stable")
        knot_t, knot_c = knot_t[k], np.maximum.accumulate(knot_c[k])
        t = np.unique(np.concatenate((self.at_ns, knot_t)))
        base = int(t[0])
        ramps = np.interp((t - base).astype(np.float64), (knot_t - base).astype(np.float64),
                          knot_c.astype(np.float64), left=0.0)
        total = self.removed_ns(t) + np.floor(ramps).astype(np.int64)
        deprofiled = np.maximum.accumulate(t - total)  # t - C(t) never decreases
        cum = t - deprofiled
        first = int(t[0] - cum[0])  # C is 0 there and rises with slope 1 to the first knot
        return replace(self, at_ns=np.concatenate(([first], t)), cum_ns=np.concatenate(([0], cum)))

    @property
    def is_identity(self) -> bool:
        return len(self.at_ns) == 0 and self.speed == 1.0 and len(self.delay_at_ns) == 0

    def delayed(self, at_ns: np.ndarray, delay_ns: np.ndarray) -> "CpuClock":
        """This clock with more queue delay: ``delay_ns[i]`` (>= 0) more host time from origin time ``at_ns[i]``."""
        at = np.concatenate((self.delay_at_ns, np.asarray(at_ns, dtype=np.int64)))
        steps = np.concatenate((np.diff(self.delay_cum_ns, prepend=0), np.maximum(np.asarray(delay_ns, np.int64), 0)))
        order = np.argsort(at, kind="stable")
        return replace(self, delay_at_ns=at[order], delay_cum_ns=np.cumsum(steps[order]))

    def queued_ns(self, t: np.ndarray) -> np.ndarray:
        """Q(t): the host time full launch queues added up to each origin time ``t``."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.delay_at_ns) == 0:
            return np.zeros(t.shape, dtype=np.int64)
        k = np.searchsorted(self.delay_at_ns, t, side="right")
        return np.where(k > 0, self.delay_cum_ns[np.maximum(k - 1, 0)], 0)

    def deprofiled(self, t: np.ndarray) -> np.ndarray:
        """t - C(t): origin CPU times without the profiler's overhead (before the speed and the queue delays)."""
        t = np.asarray(t, dtype=np.int64)
        return t - self.removed_ns(t) if len(self.at_ns) else t.copy()

    def removed_ns(self, t: np.ndarray) -> np.ndarray:
        """C(t): the profiler overhead accrued up to each time ``t`` (int64 ns)."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.at_ns) == 0:
            return np.zeros(t.shape, dtype=np.int64)
        base = int(self.at_ns[0])  # interpolate on offsets: epoch nanoseconds lose precision as floats
        return np.floor(np.interp((t - base).astype(np.float64), (self.at_ns - base).astype(np.float64),
                                  self.cum_ns.astype(np.float64))).astype(np.int64)

    def __call__(self, t: np.ndarray, deprofiled: np.ndarray | None = None) -> np.ndarray:
        """The target host's time of origin CPU times ``t`` (int64 ns, monotone non-decreasing in t); ``deprofiled``:
        t - C(t) when already known (every clock with these knots shares it)."""
        t = np.asarray(t, dtype=np.int64)
        d = deprofiled if deprofiled is not None else self.deprofiled(t)
        if self.speed != 1.0:
            d = self.origin_ns + np.rint((d - self.origin_ns) / self.speed).astype(np.int64)
        return d + self.queued_ns(t) if len(self.delay_at_ns) else d


class Deprofiled:
    """t - C(t) of fixed origin times ``t``, kept for the last clocks' overhead knots (the central, band and
    queue-delayed clocks of a trace share them): the interpolation is most of a clock's cost on a million times."""

    KEEP = 2  # the overhead estimate's knots, and none (the band's slow end when it removes nothing)

    def __init__(self, t: np.ndarray) -> None:
        self.t = np.asarray(t, dtype=np.int64)
        self.known: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def of(self, clock: CpuClock) -> np.ndarray:
        """clock.deprofiled(t), read-only."""
        for at, cum, d in self.known:
            if at is clock.at_ns and cum is clock.cum_ns:
                return d
        d = clock.deprofiled(self.t)
        d.setflags(write=False)
        self.known = (self.known + [(clock.at_ns, clock.cum_ns, d)])[-self.KEEP:]
        return d

    def on(self, clock: CpuClock) -> np.ndarray:
        """clock(t)."""
        return clock(self.t, self.of(clock))

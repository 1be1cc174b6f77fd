"""``CpuClock``: the target host's CPU time as a monotone function of the trace's (profiled) CPU time.

Two things change the host's pace and nothing else: the profiler's own overhead, which the un-profiled loop does
not pay (removed: every recorded event costs the host ``cost_ns`` when it starts, estimated by
timeline/overhead.py or measured by our hook), and a what-if host speed (``--cpu-speed``: CPU durations divided by
it). With C(t) the overhead accrued up to t and t0 the trace's first CPU time:

    D(t) = max over knots s <= t of (s - C(s)), and t - C(t)        (never decreasing: a thread's order holds)
    clock(t) = t0 + (D(t) - t0) / speed

Where recorded events follow each other faster than their overhead accrues, D stays flat: that host time was all
profiler. The identity clock (no overhead, speed 1) maps every time to itself, so a replay without either is
byte-identical to one without a clock. GPU times are never mapped: kernels keep their speed under the profiler.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CpuClock:
    """The map above. ``at_ns`` sorted; ``cum_ns[i]`` = overhead accrued at or before ``at_ns[i]``;
    ``best_ns[i]`` = max over j <= i of at_ns[j] - cum_ns[j] (D at the knots)."""

    at_ns: np.ndarray
    cum_ns: np.ndarray
    best_ns: np.ndarray
    origin_ns: int = 0
    speed: float = 1.0

    @classmethod
    def identity(cls) -> "CpuClock":
        empty = np.zeros(0, dtype=np.int64)
        return cls(empty, empty, empty)

    @classmethod
    def removing(cls, at_ns: np.ndarray, cost_ns: np.ndarray, origin_ns: int = 0, speed: float = 1.0) -> "CpuClock":
        """A clock that removes ``cost_ns[i]`` (>= 0) of host time at ``at_ns[i]`` and runs ``speed`` times as fast."""
        if not speed > 0:
            raise ValueError(f"CPU speed must be > 0, got {speed}")
        at = np.asarray(at_ns, dtype=np.int64)
        cost = np.maximum(np.asarray(cost_ns, dtype=np.int64), 0)
        order = np.argsort(at, kind="stable")
        at, cost = at[order], cost[order]
        keep = cost > 0
        at, cost = at[keep], cost[keep]
        cum = np.cumsum(cost, dtype=np.int64)
        best = np.maximum.accumulate(at - cum) if len(at) else at
        return cls(at, cum, best, int(origin_ns), float(speed))

    @property
    def is_identity(self) -> bool:
        return len(self.at_ns) == 0 and self.speed == 1.0

    def removed_ns(self, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
        """Host time the clock removes from each interval [start, end] (before the speed-up)."""
        d = self.deprofiled(np.asarray(end_ns)) - self.deprofiled(np.asarray(start_ns))
        return np.asarray(end_ns, dtype=np.int64) - np.asarray(start_ns, dtype=np.int64) - d

    def deprofiled(self, t: np.ndarray) -> np.ndarray:
        """D(t): the time without the overhead accrued before it (int64 ns)."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.at_ns) == 0:
            return t.copy()
        k = np.searchsorted(self.at_ns, t, side="right")
        prev = np.maximum(k - 1, 0)
        accrued = np.where(k > 0, self.cum_ns[prev], 0)
        return np.where(k > 0, np.maximum(self.best_ns[prev], t - accrued), t)

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """The target host's time of origin CPU times ``t`` (int64 ns, monotone non-decreasing in t)."""
        d = self.deprofiled(t)
        if self.speed == 1.0:
            return d
        return self.origin_ns + np.rint((d - self.origin_ns) / self.speed).astype(np.int64)

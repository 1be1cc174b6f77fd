"""What a trace proves about each step's real (un-profiled) duration, whatever the profiler cost: lower bounds.

``step_floor(tables)`` gives, per ProfilerStep (int64 ns):
- ``busy``: the busy time of the step's busiest stream (union of its GPU events on that stream): a stream runs its
  work in order, so the loop cannot run it faster. Not the union over streams (timeline.steps' "GPU busy"): streams
  may overlap more without the profiler (a DDP all-reduce under a slowed host overlaps less of the backward), and not
  collective kernels (classify.NCCL), whose recorded time includes waiting for the other ranks' profiled hosts;
- ``calls``: the host's own time in the step's non-blocking runtime/driver calls (cudaLaunchKernel, cudaMemcpyAsync,
  ...), each less the most the profiler can add to one call (CUPTI_CALL_MAX_NS): the loop still makes every call;
- ``sync``: for each blocking call the trace shows waiting for GPU work (it started before the last of the step's
  earlier work on one stream ended and returned within SYNC_MATCH_NS of that end), the busy time of that stream's
  work launched in the step before the call, plus the ``calls`` time after it: the work must run before the call
  returns, and no earlier than the step that launched it.
A de-profiled step is never shorter than any of them; ``host`` = max(calls, sync) bounds the host's own span.
``call_segments`` are the protected call intervals themselves: overhead.py places no removal inside them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.classify import NCCL
from habitat_trace.timeline.intervals import covered_before, merged, union_length

# The most CUPTI's callbacks can add to one runtime call. Profiling CUDA activity alone (variant e of
# benchmarks/results/profiler_overhead, 24 workload x host runs) changed the host's issue time by 0.6 +- 1.3 us per
# runtime/driver call (mean +- standard error; benchmarks/overhead_eval.py "per-call"); this is the mean plus two
# standard errors, rounded up, so a call's floor is never above its un-profiled cost at that confidence.
CUPTI_CALL_MAX_NS = 3_300
# A blocking call "waited for" a stream when it returned within this of the stream's last earlier GPU event's end:
# the 90 blocking calls of ../shared/data/traces and benchmarks/traces that lasted > 100 us and outlived a GPU event
# returned 9 us (median), 27 us (p90), 40 us (max) after the last GPU event ended (measured 2026-12, issue 28).
SYNC_MATCH_NS = 50_000


@dataclass(frozen=True)
class StepFloor:
    """Lower bounds on each step's real duration (module doc), one entry per row of the steps table."""

    busy_ns: np.ndarray
    calls_ns: np.ndarray
    sync_ns: np.ndarray

    @property
    def host_ns(self) -> np.ndarray:
        """The host's own span cannot be shorter than this."""
        return np.maximum(self.calls_ns, self.sync_ns)

    @property
    def step_ns(self) -> np.ndarray:
        """The step cannot be shorter than this."""
        return np.maximum(self.busy_ns, self.host_ns)


def call_segments(calls: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted (start, end) of the union of every non-blocking call's protected span
    ``[ts, ts + max(dur - CUPTI_CALL_MAX_NS, 0))``; blocking calls wait, and a replay recomputes waits."""
    if not len(calls):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    blocking = calls[S.SYNC_KIND].isin(S.BLOCKING_SYNC_KINDS).to_numpy() if S.SYNC_KIND in calls else \
        np.zeros(len(calls), dtype=bool)
    ts = calls[S.TS].to_numpy(dtype=np.int64)
    own = np.maximum(calls[S.DUR].to_numpy(dtype=np.int64) - CUPTI_CALL_MAX_NS, 0)
    keep = ~blocking & (own > 0)
    return merged(ts[keep], ts[keep] + own[keep])


def _calls_in(seg: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return covered_before(*seg, b) - covered_before(*seg, a)


def _sync_floor(gpu: pd.DataFrame, block: pd.DataFrame, seg: tuple[np.ndarray, np.ndarray], end: int) -> int:
    """The sync bound of one step (module doc): ``gpu`` and ``block`` are the step's GPU events and blocking calls."""
    best = 0
    launch, stream = gpu[S.LAUNCH_TS].to_numpy(), (gpu[S.DEVICE].to_numpy() << 32) + gpu[S.STREAM].to_numpy()
    g_ts, g_end = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy()
    for b_ts, b_end in zip(block[S.TS].to_numpy(), block[S.END].to_numpy()):
        after = int(_calls_in(seg, np.array([b_end]), np.array([end]))[0])
        for k in np.unique(stream[launch < b_ts]):
            m = (launch < b_ts) & (stream == k)
            last = int(g_end[m].max())
            if b_ts < last and abs(int(b_end) - last) <= SYNC_MATCH_NS:  # it waited for this stream's work
                best = max(best, union_length(g_ts[m], g_end[m]) + after)
    return best


@dataclass(frozen=True)
class _Streams:
    """The GPU table's columns that a step's busiest stream reads, as arrays once (a DataFrame per step cost more
    than the arithmetic)."""

    counted: np.ndarray  # not a collective (classify.NCCL)
    key: np.ndarray  # device << 32 + stream
    ts: np.ndarray
    end: np.ndarray

    @classmethod
    def of(cls, gpu: pd.DataFrame) -> "_Streams":
        counted = (gpu[S.KCLASS] != NCCL).to_numpy() if S.KCLASS in gpu else np.ones(len(gpu), dtype=bool)
        return cls(counted, (gpu[S.DEVICE].to_numpy() << 32) + gpu[S.STREAM].to_numpy(), gpu[S.TS].to_numpy(),
                   gpu[S.END].to_numpy())

    def busiest(self, rows: np.ndarray) -> int:
        """Busy time of the busiest stream among the non-collective events of ``rows``."""
        rows = rows[self.counted[rows]]
        if not len(rows):
            return 0
        key, ts, end = self.key[rows], self.ts[rows], self.end[rows]
        return max(union_length(ts[key == k], end[key == k]) for k in np.unique(key))


def step_floor(tables: object) -> StepFloor:
    """The lower bounds of every step of a loaded trace (``habitat_trace.ingest.Trace``)."""
    return floor_of(tables.steps, tables.calls, tables.gpu)  # type: ignore[attr-defined]


def floor_of(steps: pd.DataFrame, calls: pd.DataFrame, gpu: pd.DataFrame | None = None) -> StepFloor:
    """The lower bounds from the steps, calls and GPU tables; without ``gpu`` only the calls bound (busy, sync 0)."""
    n = len(steps)
    start, end = steps[S.TS].to_numpy(dtype=np.int64), steps[S.END].to_numpy(dtype=np.int64)
    seg = call_segments(calls)
    calls_ns = _calls_in(seg, start, end).astype(np.int64) if n else np.zeros(0, dtype=np.int64)
    busy = np.zeros(n, dtype=np.int64)
    sync = np.zeros(n, dtype=np.int64)
    if gpu is None:
        return StepFloor(busy, calls_ns, sync)
    gpu_rows = _by_step(gpu[S.STEP].to_numpy(), n)
    blocking = calls[S.SYNC_KIND].isin(S.BLOCKING_SYNC_KINDS).to_numpy() if len(calls) else np.zeros(0, bool)
    block_rows = _by_step(np.where(blocking, calls[S.STEP].to_numpy(), S.NONE) if len(calls) else
                          np.zeros(0, dtype=np.int64), n)
    streams = _Streams.of(gpu)
    for i in range(n):
        busy[i] = streams.busiest(gpu_rows[i])
        if len(block_rows[i]) and len(gpu_rows[i]):
            sync[i] = _sync_floor(gpu.iloc[gpu_rows[i]], calls.iloc[block_rows[i]], seg, int(end[i]))
    return StepFloor(busy, calls_ns, sync)


def _by_step(step: np.ndarray, n: int) -> list[np.ndarray]:
    """The rows of each step 0 .. n-1, in table order, from one stable sort: a mask per step made the floors
    quadratic in the steps (issue 34's trace has 210 of them)."""
    order = np.argsort(step, kind="stable")
    bounds = np.searchsorted(step[order], np.arange(n + 1))
    return [order[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]

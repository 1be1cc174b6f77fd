"""torch.profiler's own host overhead in a trace: how much of each step's CPU time the profiler added.

``estimate(trace)`` (or ``estimate_tables`` on the ingest tables) returns the overhead per step and per
recorded CPU event (int64 ns aligned with ``trace.ops`` / ``trace.calls`` rows) plus the evidence used, so
a replay can shift the CPU timeline back to the un-profiled one (``OverheadEstimate.shift_ns``).

Model. Every event the profiler records costs the host a fixed number of "trivial-op units" u, where u is
measured in the trace itself: the 10th percentile of the recorded durations of trivial ops (aten::as_strided,
t, transpose, empty, ... - ops with almost no work of their own, so their recorded duration is the host's
dispatch + profiler-callback speed), each name scaled to as_strided-equivalents (UNIT_RATIOS), median over names::

    cost(op)   = u * (K_OP + K_SHAPES * [op has Input Dims])
    cost(step) = sum cost(op) + u * (K_PYTHON * n_python_function + K_MEMORY * n_[memory])   (spread over the step's ops)

Each event's cost is then placed in the time since the previous recorded event on its thread, what does not
fit carried into the next gaps (``_fit_into_gaps``), so removing it never reverses the order of events and
never removes more CPU time than elapsed; a step's total is capped at its span. Runtime/driver calls get no
cost of their own: CUPTI's per-call cost (variant e) was below the run-to-run noise of the measurement.

Calibration: K_* are non-negative least squares of (profiled - un-profiled host issue time per step) on
(per-step event counts x u), weighted by 1/un-profiled time, over 12 workloads x 4 profiler variants x 2 hosts
(H100 SXM and H200 hosts, torch 2.11, 2026-11-23): benchmarks/results/profiler_overhead/{h100,h200}-sxm_overhead.jsonl
and the traces in benchmarks/traces/overhead/, recorded by benchmarks/collect/profiler_overhead.py; the fit is
benchmarks/overhead_eval.py's, its held-out checks and limits are in benchmarks/results/profiler_overhead/model.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S

# Same list as benchmarks/collect/profiler_overhead.py TRIVIAL_OPS (the calibration's pooled p10 read these).
TRIVIAL_OPS = ("aten::empty", "aten::view", "aten::detach", "aten::as_strided", "aten::t",
               "aten::transpose", "aten::expand", "aten::reshape", "aten::empty_strided", "aten::slice")
# u in aten::as_strided-equivalents: p10(name) x ratio, ratio = median over the 24 calibration traces of
# p10(as_strided) / p10(name) (spread in brackets). A pooled p10 would follow the op mix (conv nets record mostly
# aten::empty, 8x as_strided's cost); view (0.23-1.25) and detach (0.23-0.57) vary too much to be used.
UNIT_RATIOS = {
    "aten::as_strided": 1.0,
    "aten::t": 0.112,  # 0.047-0.131
    "aten::transpose": 0.203,  # 0.134-0.240
    "aten::empty": 0.124,  # 0.102-0.214
    "aten::empty_strided": 0.114,  # 0.055-0.176
    "aten::reshape": 0.192,  # 0.126-0.214
    "aten::slice": 0.173,  # 0.152-0.235
    "aten::expand": 0.131,  # 0.086-0.228
}
UNIT_QUANTILE = 0.10  # low quantile: the host's cheapest recorded events, not ops that happened to do work
MIN_PER_NAME = 10  # fewer events of a name than this: that name does not vote
# Median u of the 24 calibration traces (variant a, both hosts); used only when a trace has no trivial ops.
FALLBACK_UNIT_NS = 468
# Fitted coefficients, in units of u (model.md, "fit"): per recorded op, extra per op with recorded shapes,
# per python_function event (with_stack), per [memory] event (profile_memory).
K_OP = 6.81
K_SHAPES = 1.18
K_PYTHON = 1.73
K_MEMORY = 0.05
STEP_PREFIX = "ProfilerStep#"


@dataclass(frozen=True)
class Evidence:
    """What the estimate rests on, read from the trace."""
    record_shapes: bool  # any op carries Input Dims
    with_stack: bool  # python_function events present
    profile_memory: bool  # [memory] events present
    unit_ns: int  # u: low-quantile duration of trivial recorded ops
    unit_measured: bool  # False: too few trivial ops, FALLBACK_UNIT_NS used
    n_trivial: int
    ops_per_step: float
    calls_per_step: float
    python_per_step: float
    memory_per_step: float


@dataclass(frozen=True)
class OverheadEstimate:
    per_step_ns: np.ndarray  # int64, one per row of the steps table
    op_ns: np.ndarray  # int64, one per row of the ops table (0 for ProfilerStep annotations)
    call_ns: np.ndarray  # int64, one per row of the calls table (0: see module doc)
    evidence: Evidence
    warnings: tuple[str, ...] = ()
    _knots: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    def knots(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(event starts, cumulative removal there) on thread ``tid``: C(t) interpolates them linearly, 0 at
        ``starts[0] - cum[0]`` (empty arrays for a thread without ops)."""
        empty = np.zeros(0, dtype=np.int64)
        return self._knots.get(tid, (empty, empty))

    def shift_ns(self, ts_ns: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Overhead removed on ``tid`` before each time ``ts_ns`` (int64): ``ts - shift`` is the un-profiled time.
        The removal is spread linearly over each gap between event starts (slope <= 1), so a later time on the
        same thread never maps before an earlier one."""
        ts, tid = np.asarray(ts_ns, dtype=np.int64), np.asarray(tid)
        out = np.zeros(len(ts), dtype=np.int64)
        for t, (starts, cum) in self._knots.items():
            m = tid == t
            if m.any() and len(starts):
                base = starts[0]  # interpolate on offsets: epoch nanoseconds lose precision as floats
                knot_t = np.concatenate(([-cum[0]], starts - base)).astype(float)
                knot_c = np.concatenate(([0], cum)).astype(float)
                out[m] = np.floor(np.interp((ts[m] - base).astype(float), knot_t, knot_c)).astype(np.int64)
        return out


def _unit(ops: pd.DataFrame) -> tuple[int, bool, int]:
    """u (ns, as_strided-equivalents): median over trivial op names of p10(duration) x UNIT_RATIOS[name]."""
    sel = ops.loc[ops[S.NAME].isin(list(UNIT_RATIOS)), [S.NAME, S.DUR]]
    groups = sel.groupby(S.NAME)[S.DUR]
    counts = groups.size()
    names = counts.index[counts >= MIN_PER_NAME]
    if not len(names):
        return FALLBACK_UNIT_NS, False, len(sel)
    p10 = groups.quantile(UNIT_QUANTILE)[names]
    votes = p10.to_numpy(dtype=float) * np.array([UNIT_RATIOS[n] for n in names])
    return int(round(float(np.median(votes)))), True, len(sel)


def _has_shapes(ops: pd.DataFrame) -> np.ndarray:
    dims = ops[S.INPUT_DIMS].to_numpy(dtype=object) if S.INPUT_DIMS in ops else np.full(len(ops), None)
    return np.array([d is not None and len(d) > 0 for d in dims], dtype=bool)


def _per_step(values_step: np.ndarray, n_steps: int) -> np.ndarray:
    ok = (values_step >= 0) & (values_step < n_steps)
    return np.bincount(values_step[ok], minlength=n_steps)[:n_steps]


def _fit_into_gaps(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, raw: np.ndarray
                   ) -> tuple[np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Place each event's cost in the time since the previous event start on its thread (its own duration for
    the first), carrying what does not fit into the following gaps: the cumulative removal per thread is
    ``C_i = min(R_i, C_(i-1) + gap_i)`` with R the cumulative raw cost, i.e. ``C = G + min(cummin(R - G), 0)`` with G the
    cumulative gaps. So the shift is a monotone time map, never exceeds the elapsed time, and loses nothing of
    the raw cost that later idle time can absorb (nested ops start microseconds apart)."""
    order = np.lexsort((ts, tid))
    t_s, tid_s, raw_s = ts[order], tid[order], raw[order]
    out_s = np.zeros(len(order), dtype=np.int64)
    knots = {}
    for t in np.unique(tid_s):
        m = np.flatnonzero(tid_s == t)
        gap = np.empty(len(m), dtype=np.int64)
        gap[0] = max(int(dur[order][m[0]]), 0)
        gap[1:] = np.diff(t_s[m])
        g, r = np.cumsum(gap), np.cumsum(raw_s[m])
        cum = g + np.minimum(np.minimum.accumulate(r - g), 0)  # the 0: C_(-1) = 0, so C_i <= G_i
        out_s[m] = np.diff(cum, prepend=0)
        knots[int(t)] = (t_s[m], cum)
    out = np.empty_like(out_s)
    out[order] = out_s
    return out, knots


def estimate_tables(ops: pd.DataFrame, calls: pd.DataFrame, steps: pd.DataFrame, n_memory: np.ndarray | None = None,
                    n_python: np.ndarray | None = None, scale: float = 1.0) -> OverheadEstimate:
    """The estimate from ingest tables; ``n_memory`` / ``n_python``: [memory] / python_function events per step
    row (None: none recorded)."""
    n_steps = len(steps)
    n_memory = np.zeros(n_steps) if n_memory is None else np.asarray(n_memory, dtype=float)
    n_python = np.zeros(n_steps) if n_python is None else np.asarray(n_python, dtype=float)
    is_step = ops[S.NAME].astype(str).str.startswith(STEP_PREFIX).to_numpy() if len(ops) else np.zeros(0, bool)
    shapes = _has_shapes(ops) & ~is_step
    unit, measured, n_trivial = _unit(ops)
    raw = np.where(is_step, 0.0, unit * (K_OP + K_SHAPES * shapes))
    op_step = ops[S.STEP].to_numpy(dtype=np.int64) if len(ops) else np.zeros(0, np.int64)
    counted = ~is_step & (op_step >= 0) & (op_step < n_steps)
    ops_in_step = _per_step(op_step[counted], n_steps)
    extra = unit * (K_PYTHON * n_python + K_MEMORY * n_memory)  # per step, spread evenly over its ops
    share = np.where(ops_in_step > 0, extra / np.maximum(ops_in_step, 1), 0.0)
    raw = scale * (raw + np.where(counted, share[np.clip(op_step, 0, max(n_steps - 1, 0))] if n_steps else 0.0, 0.0))
    ts = ops[S.TS].to_numpy(dtype=np.int64)
    clipped, knots = _fit_into_gaps(ts, ops[S.DUR].to_numpy(dtype=np.int64), ops[S.TID].to_numpy(dtype=np.int64),
                                   np.round(raw).astype(np.int64))
    per_step = np.bincount(op_step[counted], weights=clipped[counted], minlength=n_steps)[:n_steps]
    per_step = np.minimum(np.round(per_step).astype(np.int64), steps[S.DUR].to_numpy(dtype=np.int64))
    warnings = () if measured or not len(ops) else (
        f"fewer than {MIN_PER_NAME} of each trivial op ({n_trivial} in all): host unit u taken as "
        f"{FALLBACK_UNIT_NS} ns (calibration median)",)
    n = max(n_steps, 1)
    ev = Evidence(record_shapes=bool(shapes.any()), with_stack=bool(n_python.sum() > 0),
                  profile_memory=bool(n_memory.sum() > 0), unit_ns=unit, unit_measured=measured, n_trivial=n_trivial,
                  ops_per_step=float(counted.sum()) / n, calls_per_step=float(len(calls)) / n,
                  python_per_step=float(n_python.sum()) / n, memory_per_step=float(n_memory.sum()) / n)
    return OverheadEstimate(per_step_ns=per_step, op_ns=clipped, call_ns=np.zeros(len(calls), dtype=np.int64),
                            evidence=ev, warnings=warnings, _knots=knots)


def _count_in_steps(ts: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    start, end = steps[S.TS].to_numpy(dtype=np.int64), steps[S.END].to_numpy(dtype=np.int64)
    out = np.zeros(len(steps))
    for i, (a, b) in enumerate(zip(start, end)):  # a handful of steps
        out[i] = np.count_nonzero((ts >= a) & (ts < b))
    return out


def python_event_count(events: Iterable[Any]) -> int:
    """Number of python_function events (with_stack): a byte count on the raw document when ingest kept it."""
    raw = getattr(events, "_raw", None)
    if isinstance(raw, (bytes, bytearray)):
        return raw.count(b'"python_function"')
    return sum(1 for e in events if isinstance(e, dict) and e.get("cat") == S.CAT_PYTHON)


def estimate(trace: object, one_clock: bool = False, scale: float = 1.0) -> OverheadEstimate:
    """The estimate for a loaded ``habitat_trace.ingest.Trace``. ``one_clock``: place every thread's costs on one
    time line (the replay's CPU map is one for all threads: pipeline.host_clock), its knots under thread 0;
    ``scale``: multiply every cost (calibration to a measured un-profiled step, pipeline.host_clock)."""
    steps = trace.steps  # type: ignore[attr-defined]
    mem = trace.memory  # type: ignore[attr-defined]
    n_memory = _count_in_steps(mem[S.TS].to_numpy(dtype=np.int64), steps) if len(mem) else None
    n_py = python_event_count(trace.events)  # type: ignore[attr-defined]
    ops_step = trace.ops[S.STEP].to_numpy(dtype=np.int64)  # type: ignore[attr-defined]
    weight = _per_step(ops_step, len(steps)).astype(float)  # python events spread over steps like the ops
    n_python = n_py * weight / weight.sum() if n_py and weight.sum() > 0 else None
    ops = trace.ops  # type: ignore[attr-defined]
    if one_clock:
        ops = ops.assign(**{S.TID: 0})
    return estimate_tables(ops, trace.calls, steps, n_memory, n_python, scale)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- launch-queue back-pressure
# Launches one stream holds pending before cudaLaunchKernel blocks: 1021 behind a running spin kernel, on the
# H100 and the H200 host alike (driver 580.159, CUDA 13.0, torch 2.11; both _sleep(0) and aten add_ launches;
# benchmarks/results/profiler_overhead/{h100,h200}-sxm_queue.json). The blocked launch returns when a slot frees.
LAUNCH_QUEUE_DEPTH = 1021


def queue_delay_ns(launch_ns: np.ndarray, kernel_end_ns: np.ndarray, stream: np.ndarray | None = None,
                   depth: int = LAUNCH_QUEUE_DEPTH) -> np.ndarray:
    """Host delay (int64 ns, non-decreasing) that a full launch queue adds to each launch, in host order.

    Launch i on a stream cannot return before the kernel ``depth`` launches earlier on that stream has ended,
    and the host thread carries each delay forward: ``D_i = max(D_(i-1), end[i - depth] - launch_i, 0)``.
    ``kernel_end_ns`` are the GPU end times a replay computed for these launches; where the delay shifts launches
    past their kernels' start, recompute the ends with ``launch + D`` and apply again (a fixed point in a few rounds).
    The caching allocator adds no such wait in steady state: reuse and a fresh cudaMalloc returned in < 0.5 ms
    behind a 300 ms kernel; only cudaFree (empty_cache, the out-of-memory retry) waited for the GPU (queue.json).
    """
    launch = np.asarray(launch_ns, dtype=np.int64)
    end = np.asarray(kernel_end_ns, dtype=np.int64)
    stream = np.zeros(len(launch), dtype=np.int64) if stream is None else np.asarray(stream)
    need = np.zeros(len(launch), dtype=np.int64)
    for s in np.unique(stream):
        idx = np.flatnonzero(stream == s)
        if len(idx) > depth:
            need[idx[depth:]] = end[idx[:-depth]] - launch[idx[depth:]]
    return np.maximum.accumulate(np.maximum(need, 0)) if len(need) else need

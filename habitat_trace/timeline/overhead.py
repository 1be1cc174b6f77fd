"""torch.profiler's own host overhead in a trace: how much of each step's CPU time the profiler added.

``estimate(trace)`` (or ``estimate_tables`` on the ingest tables) returns the overhead per step and per
recorded CPU event (int64 ns aligned with ``trace.ops`` / ``trace.calls`` rows), what the trace proves of each
step (timeline/floors.py) and the evidence used, so a replay can shift the CPU timeline back to the
un-profiled one (``OverheadEstimate.shift_ns``, or cpuclock.CpuClock from its knots).

Model. Every event the profiler records costs the host a fixed number of "trivial-op units" u, where u is
measured in the trace itself: the 10th percentile of the recorded durations of trivial ops (aten::as_strided,
t, transpose, empty, ... - ops with almost no work of their own, so their recorded duration is the host's
dispatch + profiler-callback speed), each name scaled to as_strided-equivalents (UNIT_RATIOS), median over names;
and the profiler slows the host's own work (Python between ops, dispatch) in proportion: a share K_HOST of the
host's time outside runtime calls since the previous op start (``host_free_ns``; measured, not derived: a per-event
cost alone fitted the host-bound rows worse held out, model.md "Issue 31")::

    cost(op)   = u * K_OP + K_HOST * free(op)
    cost(step) = sum cost(op) + u * (K_PYTHON * n_python_function + K_MEMORY * n_[memory])   (spread over the step's ops)

Each event's cost is then placed in the time since the previous recorded event on its thread less the host's own
time in runtime calls there (floors.call_segments: what the un-profiled loop pays too), what does not fit carried
into the next gaps (``_fit_into_gaps``), so removing it never reverses the order of events, never removes more CPU
time than elapsed, and never shortens a launch call below its own cost; a step's total is capped at its span less
floors.StepFloor.host_ns. Runtime/driver calls get no cost of their own: CUPTI's per-call cost (variant e) was
below the run-to-run noise of the measurement.

Range: timeline/hostband.py (the origin row's measured error, as host clocks for any replay). Warnings travel
with the estimate: the fallback u, u outside the calibrated hosts' range (an extrapolation: the range then reaches
the profiled step) and an estimate above OVERHEAD_WARN_SHARE of a profiled step.

Calibration: K_OP and K_HOST are non-negative least squares of the overhead each host-bound row needed, weighted by
1/un-profiled time, over 58 rows: the 24 calibration runs (profiled - un-profiled host issue time per step; 12
workloads, H100 SXM and H200 hosts, torch 2.11, 2026-11-23: benchmarks/results/profiler_overhead/{h100,h200}-sxm_
overhead.jsonl and the traces in benchmarks/traces/overhead/) and the 34 launch-bound origin rows of ../shared and
benchmarks/traces (the origin row less the measured loop); benchmarks/overhead_features.py and
overhead_candidates.py, held-out figures (leave one workload family out, leave one host out) in
benchmarks/results/profiler_overhead/model.md "Issue 31". K_PYTHON and K_MEMORY are issue 16's (model.md, "fit").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.scale.dp_host import HOST_UNIT_NS
from habitat_trace.timeline import floors, intervals

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
# Median u of the 24 calibration traces (variant a, both hosts; one figure with data parallelism's host unit, which
# is it); used only when a trace has no trivial ops.
FALLBACK_UNIT_NS = HOST_UNIT_NS
# Fitted coefficients (model.md, "Issue 31"): per recorded op in units of u, and the share of the host's own time
# (outside runtime calls) the profiler added; per python_function event (with_stack) and per [memory] event
# (profile_memory) in units of u, as fitted at issue 16 (model.md, "fit").
K_OP = 2.15
K_HOST = 0.32
K_PYTHON = 1.73
K_MEMORY = 0.05
STEP_PREFIX = "ProfilerStep#"
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")  # as the collector
# Above this share of the profiled step the estimate comes with a warning (issue 28): the calibration runs' largest
# measured overhead was 58% of a profiled step (hf_gpt2_decode16_b1 with profile_memory on the H200 host).
OVERHEAD_WARN_SHARE = 0.60
# u of the 24 calibration traces (model.md: 300-770 ns); a trace whose u is more than UNIT_EXTRAPOLATION times
# outside this range is an extrapolation of the fit, and its range reaches the profiled step.
UNIT_CALIBRATED_NS = (300, 770)
UNIT_EXTRAPOLATION = 2.0


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
    launch_ns: int = 0  # median kernel-launch call duration: the host's pace, independent of record_shapes
    extrapolated: bool = False  # u outside the calibrated hosts' range (UNIT_CALIBRATED_NS, UNIT_EXTRAPOLATION)


@dataclass(frozen=True)
class OverheadEstimate:
    """The overhead per step (``per_step_ns``), never leaving a step shorter than ``floor`` proves."""

    per_step_ns: np.ndarray  # int64, one per row of the steps table
    op_ns: np.ndarray  # int64, one per row of the ops table (0 for ProfilerStep annotations)
    call_ns: np.ndarray  # int64, one per row of the calls table (0: see module doc)
    evidence: Evidence
    warnings: tuple[str, ...] = ()
    floor: floors.StepFloor | None = None
    _knots: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    def knots(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(knot times, cumulative removal there) on thread ``tid``: C(t) interpolates them linearly, 0 at
        ``starts[0] - cum[0]`` (empty arrays for a thread without ops). Knots are the event starts plus the
        protected call segments' ends between them (C is flat across a protected call)."""
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
    # judged once per distinct object: ingest keeps one object for equal shape lists (tables._shared), so a 600k-op
    # trace has a few thousand (a check per op took 0.15 s of issue 34's trace)
    codes, uniq = pd.factorize(np.fromiter(map(id, dims), dtype=np.int64, count=len(dims)))
    one = np.empty(len(uniq), dtype=object)
    one[codes] = dims  # equal ids: the same object
    return np.array([isinstance(d, (list, tuple)) and len(d) > 0 for d in one], dtype=bool)[codes]  # not a list: none


def _starts_with(names: pd.Series, prefix: str) -> np.ndarray:
    """``names.astype(str).str.startswith(prefix)``, judged once per distinct name (a missing one reads "nan")."""
    codes, uniq = pd.factorize(names.to_numpy(dtype=object))
    return np.append(np.array([str(u).startswith(prefix) for u in uniq], dtype=bool), False)[codes]


def _per_step(values_step: np.ndarray, n_steps: int) -> np.ndarray:
    ok = (values_step >= 0) & (values_step < n_steps)
    return np.bincount(values_step[ok], minlength=n_steps)[:n_steps]


def _fit_into_gaps(ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, raw: np.ndarray,
                   protected: dict[int, tuple[np.ndarray, np.ndarray]]
                   ) -> tuple[np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Place each event's cost in the time since the previous event start on its thread (its own duration for
    the first), less the thread's ``protected`` call time in it (floors.call_segments: the host's own cost of its
    runtime calls, which the un-profiled loop pays too), carrying what does not fit into the following gaps: the
    cumulative removal is ``C_i = min(R_i, C_(i-1) + gap_i)`` with R the cumulative raw cost, i.e.
    ``C = G + min(cummin(R - G), 0)`` with G the cumulative gaps. So the shift is a monotone time map, never exceeds
    the elapsed unprotected time, and loses nothing of the raw cost that later idle time can absorb (nested ops start
    microseconds apart). The knots add the protected segments' ends, so C stays flat across a protected call."""
    order = np.lexsort((ts, tid))
    t_s, tid_s, raw_s, dur_s = ts[order], tid[order], raw[order], dur[order]
    out_s = np.zeros(len(order), dtype=np.int64)
    knots = {}
    empty = np.zeros(0, dtype=np.int64)
    for t in np.unique(tid_s):
        m = np.flatnonzero(tid_s == t)
        seg = protected.get(int(t), (empty, empty))
        starts = t_s[m]
        tau = starts - intervals.covered_before(*seg, starts)  # the thread's unprotected time at each start
        gap = np.empty(len(m), dtype=np.int64)
        first_end = np.array([starts[0] + max(int(dur_s[m[0]]), 0)])
        gap[0] = int(first_end[0] - starts[0] - (intervals.covered_before(*seg, first_end)[0] - (starts[0] - tau[0])))
        gap[1:] = np.diff(tau)
        g, r = np.cumsum(gap), np.cumsum(raw_s[m])
        cum = g + np.minimum(np.minimum.accumulate(r - g), 0)  # the 0: C_(-1) = 0, so C_i <= G_i
        out_s[m] = np.diff(cum, prepend=0)
        knots[int(t)] = _flat_across(starts, tau, cum, seg)
    out = np.empty_like(out_s)
    out[order] = out_s
    return out, knots


def _sorted_union(*runs: np.ndarray) -> np.ndarray:
    """``np.union1d`` of arrays made of a few ascending runs (a thread's event starts; segment starts and ends): a
    stable sort merges runs in linear time (timsort), where union1d's sort took 0.5 s of issue 34's trace."""
    at = np.concatenate(runs)
    at.sort(kind="stable")
    keep = np.ones(len(at), dtype=bool)
    keep[1:] = at[1:] != at[:-1]
    return at[keep]


def _flat_across(starts: np.ndarray, tau: np.ndarray, cum: np.ndarray, seg: tuple[np.ndarray, np.ndarray]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Knots of C with the protected segments' ends inside [starts[0], starts[-1]] added: between event starts C
    is linear in the unprotected time tau, so it is flat across a protected segment and rises with slope
    ``dC/dtau <= 1`` elsewhere; linear interpolation between these knots reproduces it exactly."""
    inner = np.concatenate(seg) if len(seg[0]) else np.zeros(0, dtype=np.int64)
    inner = inner[(inner > starts[0]) & (inner < starts[-1])]
    if not len(inner):
        return starts, cum
    at = _sorted_union(starts, inner)
    at_tau = at - intervals.covered_before(*seg, at) - tau[0]  # offsets: epoch nanoseconds lose precision as floats
    return at, np.floor(np.interp(at_tau.astype(float), (tau - tau[0]).astype(float), cum.astype(float))).astype(np.int64)


def estimate_tables(ops: pd.DataFrame, calls: pd.DataFrame, steps: pd.DataFrame, n_memory: np.ndarray | None = None,
                    n_python: np.ndarray | None = None, scale: float = 1.0,
                    floor: floors.StepFloor | None = None) -> OverheadEstimate:
    """The estimate from ingest tables; ``n_memory`` / ``n_python``: [memory] / python_function events per step
    row (None: none recorded); ``floor``: what the trace proves of each step (floors.step_floor; None: the calls
    bound alone). The ops' and calls' threads are read from their tid columns (one-clock callers set both to 0)."""
    n_steps = len(steps)
    n_memory = np.zeros(n_steps) if n_memory is None else np.asarray(n_memory, dtype=float)
    n_python = np.zeros(n_steps) if n_python is None else np.asarray(n_python, dtype=float)
    unit, measured, n_trivial = _unit(ops)
    free = host_free_ns(ops, calls)
    raw, counted, op_step, shapes = _raw_costs(ops, n_steps, unit, n_python, n_memory, free)
    call_tid = _tids(calls)
    protected = {int(t): floors.call_segments(calls[call_tid == t]) for t in np.unique(call_tid)}
    clipped, knots = _fit_into_gaps(ops[S.TS].to_numpy(dtype=np.int64), ops[S.DUR].to_numpy(dtype=np.int64),
                                   _tids(ops), np.round(scale * raw).astype(np.int64), protected)
    floor = floor if floor is not None else floors.floor_of(steps, calls)
    span = steps[S.DUR].to_numpy(dtype=np.int64)
    per_step = np.bincount(op_step[counted], weights=clipped[counted], minlength=n_steps)[:n_steps]
    per_step = np.clip(np.round(per_step).astype(np.int64), 0, np.maximum(span - floor.host_ns, 0))
    n = max(n_steps, 1)
    ev = Evidence(record_shapes=bool(shapes.any()), with_stack=bool(n_python.sum() > 0),
                  profile_memory=bool(n_memory.sum() > 0), unit_ns=unit, unit_measured=measured, n_trivial=n_trivial,
                  ops_per_step=float(counted.sum()) / n, calls_per_step=float(len(calls)) / n,
                  python_per_step=float(n_python.sum()) / n, memory_per_step=float(n_memory.sum()) / n,
                  launch_ns=_launch_ns(calls), extrapolated=measured and not _calibrated(unit))
    return OverheadEstimate(per_step_ns=per_step, op_ns=clipped, call_ns=np.zeros(len(calls), dtype=np.int64),
                            evidence=ev, warnings=_warnings(ev, n_trivial, per_step, span, len(ops) > 0),
                            floor=floor, _knots=knots)


def _raw_costs(ops: pd.DataFrame, n_steps: int, unit: int, n_python: np.ndarray, n_memory: np.ndarray,
               free: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(raw cost per op row (float ns), op counted in a step, its step, it carries Input Dims): the model above (Input
    Dims is evidence only: record_shapes' cost is in the host time it adds, K_HOST);
    ``free``: each op row's host time outside runtime calls since the previous op start (host_free_ns)."""
    is_step = _starts_with(ops[S.NAME], STEP_PREFIX) if len(ops) else np.zeros(0, bool)
    shapes = _has_shapes(ops) & ~is_step
    raw = np.where(is_step, 0.0, unit * K_OP + K_HOST * free)
    op_step = ops[S.STEP].to_numpy(dtype=np.int64) if len(ops) else np.zeros(0, np.int64)
    counted = ~is_step & (op_step >= 0) & (op_step < n_steps)
    ops_in_step = _per_step(op_step[counted], n_steps)
    extra = unit * (K_PYTHON * n_python + K_MEMORY * n_memory)  # per step, spread evenly over its ops
    share = np.where(ops_in_step > 0, extra / np.maximum(ops_in_step, 1), 0.0)
    raw = raw + np.where(counted, share[np.clip(op_step, 0, max(n_steps - 1, 0))] if n_steps else 0.0, 0.0)
    return raw, counted, op_step, shapes


def host_free_ns(ops: pd.DataFrame, calls: pd.DataFrame) -> np.ndarray:
    """Per op row (int64 ns): the host's time since the previous op start on any thread (0 for the first: its time is
    the next op's gap) outside runtime/driver calls and outside an op's runs of calls with no op between
    (``_call_runs``): the host's own work (Python, dispatch, the profiler's callbacks), which the profiler slows in
    proportion (K_HOST). On one clock for all threads, so a thread's idle time while another works is not counted."""
    if not len(ops):
        return np.zeros(0, dtype=np.int64)
    ts = ops[S.TS].to_numpy(dtype=np.int64)
    order = np.argsort(ts, kind="stable")
    starts = ts[order]
    covered = intervals.covered_before(*intervals.merged(*_call_runs(calls, starts)), starts)
    free = np.zeros(len(order), dtype=np.int64)
    free[1:] = np.diff(starts) - np.diff(covered)
    out = np.empty_like(free)
    out[order] = np.maximum(free, 0)
    return out


def _call_runs(calls: pd.DataFrame, op_starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of every call (a blocking call's wait is in the call) and of each run of consecutive calls of
    one innermost op (S.OP) with no op starting between them (``op_starts``, sorted): the C++ host work between such
    calls (cuDNN's RNN, a compiled graph's launcher) records no op, so the profiler adds only CUPTI's small per-call
    cost there (module doc), not the callbacks' slowdown of dispatch and Python."""
    if not len(calls):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(calls[S.TS].to_numpy(dtype=np.int64), kind="stable")
    ts = calls[S.TS].to_numpy(dtype=np.int64)[order]
    end = ts + calls[S.DUR].to_numpy(dtype=np.int64)[order]
    if S.OP not in calls or len(ts) < 2:
        return ts, end
    op = calls[S.OP].to_numpy(dtype=np.int64)[order]
    # call i and i+1 are one run: the same op, and no op starts after call i began and before call i+1 ends
    between = np.searchsorted(op_starts, end[1:], "left") - np.searchsorted(op_starts, ts[:-1], "right")
    joined = (op[1:] == op[:-1]) & (op[1:] >= 0) & (between == 0)
    return np.concatenate((ts, ts[:-1][joined])), np.concatenate((end, end[1:][joined]))


def _warnings(ev: Evidence, n_trivial: int, per_step: np.ndarray, span: np.ndarray, has_ops: bool
              ) -> tuple[str, ...]:
    out = []
    if has_ops and not ev.unit_measured:
        out.append(f"fewer than {MIN_PER_NAME} of each trivial op ({n_trivial} in all): host unit u taken as "
                   f"{FALLBACK_UNIT_NS} ns (calibration median)")
    if ev.extrapolated:
        out.append(f"the trace's ops cost u = {ev.unit_ns} ns each, outside the {UNIT_CALIBRATED_NS[0]}-"
                   f"{UNIT_CALIBRATED_NS[1]} ns of the hosts the overhead model was measured on: its estimate is an "
                   "extrapolation, and the range reaches the profiled step")
    share = per_step / np.maximum(span, 1)
    if len(share) and share.max() > OVERHEAD_WARN_SHARE:
        out.append(f"the profiler overhead estimate is {100 * share.max():.0f}% of a profiled step (above "
                   f"{100 * OVERHEAD_WARN_SHARE:.0f}%): the real step is uncertain, see the range")
    return tuple(out)


def _tids(df: pd.DataFrame) -> np.ndarray:
    """Thread ids as int64 (Kineto writes them as numbers; anything else is thread -1)."""
    if not len(df):
        return np.zeros(0, dtype=np.int64)
    return pd.to_numeric(df[S.TID], errors="coerce").fillna(-1).to_numpy(dtype=np.int64)


def _launch_ns(calls: pd.DataFrame) -> int:
    """Median duration of the trace's kernel-launch calls (0 without any): the host's pace, read where the profiler's
    recording options add nothing measurable (model.md: launch p50 with/without shapes within a few %)."""
    if not len(calls):
        return 0
    d = calls.loc[calls[S.NAME].isin(LAUNCH_CALLS), S.DUR]
    return int(d.median()) if len(d) else 0


def _calibrated(unit_ns: int) -> bool:
    return UNIT_CALIBRATED_NS[0] / UNIT_EXTRAPOLATION <= unit_ns <= UNIT_CALIBRATED_NS[1] * UNIT_EXTRAPOLATION


def _count_in_steps(ts: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    start, end = steps[S.TS].to_numpy(dtype=np.int64), steps[S.END].to_numpy(dtype=np.int64)
    out = np.zeros(len(steps))
    for i, (a, b) in enumerate(zip(start, end)):  # a handful of steps
        out[i] = np.count_nonzero((ts >= a) & (ts < b))
    return out


def python_event_count(events: Iterable[Any]) -> int:
    """Number of python_function events (with_stack): a byte count on the document when ingest kept its bytes
    (ingest.events.Events.text_count)."""
    count = getattr(events, "text_count", None)
    if count is not None:
        return int(count(S.PYTHON_TOKEN))
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
    ops, calls = trace.ops, trace.calls  # type: ignore[attr-defined]
    if one_clock:
        ops, calls = ops.assign(**{S.TID: 0}), calls.assign(**{S.TID: 0})
    return estimate_tables(ops, calls, steps, n_memory, n_python, scale, floors.step_floor(trace))


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

"""The step figures every command reports of a replayed timeline: ``iteration_figures(tables, timeline)`` and,
for step figures already measured (a trace validate reads back), ``steady_iteration(fig)``: one iteration rule;
``iteration_and_fastest``, what the range's two ends read (timeline/hostband.py).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import Tables, derived
from habitat_trace.timeline.overhead import LAUNCH_CALLS
from habitat_trace.timeline.replay import Timeline
from habitat_trace.timeline.steps import replayed_step_figures, step_figures

# torch.profiler's schedule keeps a warm-up before its first traced step because "the overhead at the beginning of
# profiling is high and easily brings skew to the profiling result" (torch.profiler.schedule's documentation); a
# ProfilerStep numbered this was traced with nothing before it (no warm-up, and the loop's first iteration when the
# profiler starts with the loop), so it is not a steady step while the trace has others (issue 35).
FIRST_STEP = 0
# A measured step this much above the step's GPU busy time is set by the CPU, so it measures the host's pace;
# below it the GPU sets the pace and the measurement only bounds the host's time from above (pipeline.host).
CPU_BOUND_MARGIN = 1.05
# A disturbed step: one whose host ran DISTURBED_PACE or more times slower than in the trace's quickest-paced
# steady step, and that is longer than it. Two paces are read per step, relative to the other steady steps:
# - the op pace: the median, over the ops, of an op's duration over the same op's (by position) median over the
#   steps, when every steady step records the same ops (a training loop runs one program a step);
# - the launch pace: the median duration of the step's kernel-launch calls (the host's dispatch pace: a launch
#   costs the same whatever the kernel does).
# A step either pace puts at DISTURBED_PACE or more is disturbed, if it is also longer (a step can be slower per op
# yet shorter, when the quick step lost its time elsewhere: then nothing says which step the real loop is like).
# Why: a profiled window is a few steps, and one the host spent descheduled or throttled (a neighbour on a shared
# VM) moves a two-step mean by half its delay, while the real loop a user times is a median over many steps, which
# such a step does not move. Over the 62 one-GPU traces of benchmarks/results/scaleout's sessions (2 steady steps
# each), two steps within 5% of each other's length differ by 0.96-1.33x in op pace (median 1.03); of the 13 whose
# steps differ by over 20%, 10 show 1.29-1.65x in one pace or the other. Thresholds 1.1-1.3 score alike on them
# (docs/accuracy.md "Disturbed steps"), so 1.2 is not a tuned optimum. Only in a host-bound trace (its steady steps'
# mean span above CPU_BOUND_MARGIN times their mean GPU busy time): where the GPU sets the step, a full launch queue
# blocks the launches and the ops around them in the steps that wait for it, so neither pace reads the host, and
# the steps' mean is the period (iteration_figures: one step runs ahead, the next waits).
DISTURBED_PACE = 1.2
MIN_PACE_LAUNCHES = 20  # fewer launches in a step than this: its pace is not measured, and it counts as undisturbed


def iteration_figures(tables: Tables, timeline: Timeline, keep: Optional[np.ndarray] = None
                      ) -> tuple[float, float]:
    """(iteration_ms, gpu_busy_ms) on a replayed timeline, over the steady ProfilerSteps (``steady``).

    iteration = max(the mean replayed ProfilerStep span, the mean replayed GPU busy time of a step): the replayed
    CPU span keeps a launch-bound step launch-bound (its blocking calls end when the GPU work ends on the target);
    the busy time covers steps without a blocking call, whose launch queue fills until the GPU's pace sets the
    period. Means first: with back-pressure the window's first step runs ahead and a later one waits for it, so
    only their average is the steady period (with a blocking call per step every span already covers its GPU
    work, and the two orders agree). Without ProfilerSteps the whole trace is one step (its replayed GPU span).
    ``keep``: the steps read (``joint_steps``), ``steady_steps`` when None.
    """
    return steady_iteration(replayed_step_figures(tables, timeline).table, has_steps=len(tables.steps) > 0,
                            keep=steady_steps(tables) if keep is None else keep)


def steady(numbers: np.ndarray) -> np.ndarray:
    """Which of the ProfilerSteps numbered ``numbers`` are steady: all but FIRST_STEP while there are others."""
    numbers = np.asarray(numbers)
    keep = numbers != FIRST_STEP
    return keep if keep.any() else np.ones(len(numbers), dtype=bool)


def _by_step(df: pd.DataFrame, n: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(durations ns of ``df``'s ``rows`` sorted by step, the bounds of each of the ``n`` steps in them)."""
    step = df[S.STEP].to_numpy()[rows]
    dur = (df[S.END].to_numpy() - df[S.TS].to_numpy())[rows]
    order = np.argsort(step, kind="stable")  # stable: each step's events in trace order
    return dur[order], np.searchsorted(step[order], np.arange(n + 1))


def step_pace(tables: Any, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per ProfilerStep of ``tables``: (op pace, launch pace), NaN where not measured; the op pace over the steps
    ``keep`` (DISTURBED_PACE says what each is). Ratios between steps are what is read, so a uniform host clock (a
    replay's, a target's) leaves them unchanged."""
    n = len(tables.steps)
    op_pace, launch_pace = np.full(n, np.nan), np.full(n, np.nan)
    ops, calls = tables.ops, tables.calls
    if len(ops) and keep.sum() > 1:
        dur, bounds = _by_step(ops, n, ops[S.STEP].to_numpy() >= 0)
        counts = np.diff(bounds)[keep]
        if counts[0] > 0 and (counts == counts[0]).all():
            idx = np.flatnonzero(keep)
            m = np.vstack([dur[bounds[i]:bounds[i + 1]] for i in idx]).astype(np.float64)
            m = np.maximum(m, 1.0)
            op_pace[idx] = np.median(m / np.median(m, axis=0), axis=1)
    if len(calls):
        dur, bounds = _by_step(calls, n, calls[S.NAME].isin(LAUNCH_CALLS).to_numpy() & (calls[S.STEP].to_numpy() >= 0))
        for i in range(n):
            if bounds[i + 1] - bounds[i] >= MIN_PACE_LAUNCHES:
                launch_pace[i] = float(np.median(dur[bounds[i]:bounds[i + 1]]))
    return op_pace, launch_pace


def _step_busy(tables: Any) -> np.ndarray:
    return step_figures(tables.steps, tables.gpu).table["gpu_busy_ns"].to_numpy(dtype=np.float64)


def step_busy_ns(tables: Any) -> np.ndarray:
    """The recorded GPU busy time (ns) of each ProfilerStep of ``tables`` (of the one pseudo-step without steps:
    timeline.steps.step_figures); built once per Tables, for the disturbed steps' and the host calibration's
    host-bound tests."""
    return derived(tables, _step_busy)


def _steady_steps(tables: Any) -> np.ndarray:
    keep = steady(tables.steps[S.STEP_NUMBER].to_numpy())
    span = (tables.steps[S.END].to_numpy() - tables.steps[S.TS].to_numpy()).astype(np.float64)
    busy = step_busy_ns(tables)
    if keep.sum() < 2 or not span[keep].mean() > CPU_BOUND_MARGIN * busy[keep].mean():
        return keep  # one step, or the GPU sets the step
    disturbed = np.zeros(len(keep), dtype=bool)
    for pace in step_pace(tables, keep):
        known = keep & ~np.isnan(pace)
        if known.any():
            ref = np.flatnonzero(known)[np.argmin(pace[known])]  # the quickest-paced step
            disturbed |= known & (pace >= DISTURBED_PACE * pace[ref]) & (span > span[ref])
    return keep & ~disturbed if (keep & ~disturbed).any() else keep


def steady_steps(tables: Any) -> np.ndarray:
    """Which ProfilerSteps of ``tables`` the step figures read: the steady ones (``steady``) less the disturbed
    ones (DISTURBED_PACE), one bool per row of ``tables.steps``; built once per Tables."""
    return derived(tables, _steady_steps)


def disturbed_steps(tables: Any) -> frozenset[int]:
    """The numbers of the steady ProfilerSteps ``steady_steps`` leaves out as disturbed."""
    numbers = tables.steps[S.STEP_NUMBER].to_numpy()
    return frozenset(int(n) for n in numbers[steady(numbers) & ~steady_steps(tables)])


def joint_steps(tables: Any, disturbed: frozenset[int]) -> np.ndarray:
    """The steps a rank of a joint replay reads: its steady ones less every step ``disturbed`` on any rank (the
    union of ``disturbed_steps`` over the ranks). The ranks wait for each other in their collectives, so a step one
    rank's host lost is long on every rank, though only that rank's pace shows it. Where that leaves no step, every
    steady one (the same for all ranks)."""
    numbers = tables.steps[S.STEP_NUMBER].to_numpy()
    keep = steady(numbers)
    out = keep & ~np.isin(numbers, np.fromiter(disturbed, dtype=np.int64, count=len(disturbed)))
    return out if out.any() else keep


def _read(fig: pd.DataFrame, keep: Optional[np.ndarray]) -> np.ndarray:
    """The steps a step-figures table's iteration reads: ``keep`` (the steady steps less the disturbed ones), and
    back among them every disturbed step this replay's GPU paces (its span within CPU_BOUND_MARGIN of its GPU busy
    time): its host lost it nothing here, and where the GPU sets a step a full launch queue couples the steps (one
    runs ahead, the next waits for it), so only their mean is the period. A trace host-bound where it was recorded
    can be GPU-bound on a slower target (Lambda's BERT-base AMP step on a Quadro RTX 8000: its disturbed step 760 ms
    over 759 ms of kernels, the other 1090 ms, waiting for the queue it left)."""
    base = steady(fig["number"].to_numpy())
    if keep is None:
        return base
    cpu, busy = fig["cpu_ns"].to_numpy(dtype=np.float64), fig["gpu_busy_ns"].to_numpy(dtype=np.float64)
    return keep | (base & ~keep & (cpu <= CPU_BOUND_MARGIN * busy))


def steady_iteration(fig: pd.DataFrame, has_steps: bool = True, keep: Optional[np.ndarray] = None
                     ) -> tuple[float, float]:
    """(iteration_ms, gpu_busy_ms) from a step-figures table (timeline.steps) by iteration_figures' rule; also
    for a timeline already written, e.g. a predicted trace that validate reads back. ``keep``: the steps to read
    (``steady_steps`` of the tables), the steady ones by number when None."""
    cpu_ns = (fig["cpu_ns"] if has_steps else fig["gpu_span_ns"]).to_numpy().astype(np.float64)
    busy_ns = fig["gpu_busy_ns"].to_numpy().astype(np.float64)
    if has_steps:  # the rows read, as arrays (a DataFrame of them cost more than the figure: three a target)
        rows = _read(fig, keep)
        cpu_ns, busy_ns = cpu_ns[rows], busy_ns[rows]
    return max(float(cpu_ns.mean()), float(busy_ns.mean())) / 1e6, float(busy_ns.mean()) / 1e6


def iteration_and_fastest(tables: Tables, timeline: Timeline, keep: Optional[np.ndarray] = None
                          ) -> tuple[float, float]:
    """(iteration_ms, the shortest steady step in ms) on a replayed timeline: a step's own figure is max(its span,
    its GPU busy time), so a step that ran ahead of a full launch queue still counts its GPU work. Without
    ProfilerSteps both are the iteration. The range's two ends read these (timeline/hostband.py). ``keep`` as
    iteration_figures'."""
    fig = replayed_step_figures(tables, timeline).table
    if not len(tables.steps):
        it = steady_iteration(fig, has_steps=False)[0]
        return it, it
    keep = _read(fig, steady_steps(tables) if keep is None else keep)
    fastest = float(np.maximum(fig["cpu_ns"].to_numpy()[keep], fig["gpu_busy_ns"].to_numpy()[keep]).min()) / 1e6
    return steady_iteration(fig, keep=keep)[0], fastest

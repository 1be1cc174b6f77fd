"""timeline.overhead: the profiler-overhead estimate is bounded, monotone and reads its evidence from the trace."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.timeline import overhead as OH

FIXTURE = Path(__file__).parent / "data" / "mlp_b32_fp32.pt.trace.json.gz"


def _tables(ts: list[int], dur: list[int], tid: list[int], names: list[str] | None = None,
            shapes: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Ops on one step spanning all of them; calls empty."""
    n = len(ts)
    ops = pd.DataFrame({S.NAME: names or ["aten::view"] * n, S.TS: np.asarray(ts, dtype=np.int64),
                        S.DUR: np.asarray(dur, dtype=np.int64), S.TID: np.asarray(tid, dtype=np.int64),
                        S.STEP: np.zeros(n, dtype=np.int64),
                        S.INPUT_DIMS: [[[4, 4]] if shapes else None for _ in range(n)]})
    start = min(ts) if n else 0
    end = max(t + d for t, d in zip(ts, dur)) if n else 1
    steps = pd.DataFrame({S.TS: [start], S.DUR: [end - start], S.END: [end]})
    calls = pd.DataFrame({S.NAME: pd.Series([], dtype=object)})
    return ops, calls, steps


events = st.lists(st.tuples(st.integers(0, 10_000_000), st.integers(0, 50_000), st.integers(0, 2)),
                  min_size=1, max_size=60)


@given(events)
@pytest.mark.slow
def test_overhead_bounded_and_nonnegative(evs: list[tuple[int, int, int]]) -> None:
    ts, dur, tid = map(list, zip(*evs))
    ops, calls, steps = _tables(ts, dur, tid)
    est = OH.estimate_tables(ops, calls, steps)
    assert (est.op_ns >= 0).all() and (est.per_step_ns >= 0).all()
    assert est.per_step_ns[0] <= steps[S.DUR].iloc[0]
    for t in set(tid):  # never more than the time that elapsed on the thread since its first event
        m = np.asarray(tid) == t
        span = max(np.asarray(ts)[m]) - min(np.asarray(ts)[m]) + max(np.asarray(dur)[m])
        assert est.op_ns[m].sum() <= span


@given(events)
@pytest.mark.slow
def test_shift_is_a_monotone_time_map(evs: list[tuple[int, int, int]]) -> None:
    ts, dur, tid = map(list, zip(*evs))
    est = OH.estimate_tables(*_tables(ts, dur, tid))
    for t in set(tid):
        probe = np.sort(np.random.default_rng(0).integers(0, 10_100_000, 200))
        mapped = probe - est.shift_ns(probe, np.full(len(probe), t))
        assert (np.diff(mapped) >= 0).all()


@given(st.integers(1, 40), st.integers(1, 40))
@pytest.mark.slow
def test_monotone_in_number_of_recorded_events(k1: int, k2: int) -> None:
    lo, hi = sorted((k1, k2))

    def per_step(k: int) -> int:
        ts = [i * 100_000 for i in range(k)]  # 100 µs apart: far more than any event's cost, nothing clipped
        return int(OH.estimate_tables(*_tables(ts, [1_000] * k, [0] * k)).per_step_ns[0])
    assert per_step(lo) <= per_step(hi)


def test_zero_without_cpu_ops() -> None:
    ops, calls, steps = _tables([], [], [])
    steps = pd.DataFrame({S.TS: [0], S.DUR: [1_000_000], S.END: [1_000_000]})
    est = OH.estimate_tables(ops, calls, steps)
    assert est.per_step_ns.tolist() == [0] and len(est.op_ns) == 0 and not est.warnings


def _per_step(gap_ns: int, calls: pd.DataFrame | None = None, shapes: bool = True) -> int:
    """30 ops ``gap_ns`` apart (far more than an op's cost: nothing clipped), the fallback u (aten::view: no vote)."""
    ops, no_calls, steps = _tables([i * gap_ns for i in range(30)], [1_000] * 30, [0] * 30, shapes=shapes)
    return int(OH.estimate_tables(ops, no_calls if calls is None else calls, steps).per_step_ns[0])


def test_host_time_costs_in_proportion() -> None:
    """Issue 31: each op costs u K_OP plus K_HOST of the host's time since the previous op (outside calls)."""
    free = 29 * 100_000  # the 29 gaps (the first op has no previous start)
    assert abs(_per_step(100_000) - (30 * OH.FALLBACK_UNIT_NS * OH.K_OP + OH.K_HOST * free)) <= 30
    assert abs(_per_step(200_000) - _per_step(100_000) - OH.K_HOST * 29 * 100_000) <= 30


def test_time_in_runtime_calls_is_not_scaled() -> None:
    """A runtime call's own time (a launch, a blocking wait) is the loop's too: only the host's time outside calls
    is slowed by the profiler, so 40 us of calls in each gap take K_HOST x 40 us x 29 off the removal."""
    calls = pd.DataFrame({S.NAME: ["cudaLaunchKernel"] * 29, S.TS: np.arange(1, 30, dtype=np.int64) * 100_000 - 50_000,
                          S.DUR: np.full(29, 40_000, dtype=np.int64), S.TID: np.zeros(29, dtype=np.int64)})
    assert abs(_per_step(100_000) - _per_step(100_000, calls) - OH.K_HOST * 29 * 40_000) <= 30


def test_shapes_are_evidence_not_a_cost_of_their_own() -> None:
    """record_shapes' cost is the host time it adds (K_HOST): the fit gave a per-op shapes term no held-out gain
    (model.md, "Issue 31"), so the same ops and gaps cost the same with or without Input Dims."""
    assert _per_step(100_000, shapes=True) == _per_step(100_000, shapes=False) > 0


def test_unit_falls_back_with_a_warning_when_few_trivial_ops() -> None:
    ops, calls, steps = _tables([0, 100_000], [5_000, 5_000], [0, 0], names=["aten::mm", "aten::mm"])
    est = OH.estimate_tables(ops, calls, steps)
    assert not est.evidence.unit_measured and est.evidence.unit_ns == OH.FALLBACK_UNIT_NS
    assert "trivial op" in est.warnings[0]


def test_fixture_mlp_h100() -> None:
    """mlp_b32_fp32 on the H100 (shared set): profiled CPU step 4.90 ms, un-profiled 2.67 ms back to back."""
    trace = load(FIXTURE)
    est = OH.estimate(trace)
    ev = est.evidence
    assert ev.record_shapes and not ev.with_stack and not ev.profile_memory
    assert ev.unit_measured and 100 < ev.unit_ns < 5_000
    assert len(est.op_ns) == len(trace.ops) and len(est.call_ns) == len(trace.calls)
    step = trace.steps[S.DUR].to_numpy()
    assert ((est.per_step_ns > 0) & (est.per_step_ns < step)).all()
    # the estimate removes part, not all, of the 2.2 ms the profiler added (evaluation: model.md)
    assert 0.2e6 < np.median(est.per_step_ns) < 2.3e6


def test_queue_delay_zero_when_gpu_keeps_up() -> None:
    launch = np.arange(3000, dtype=np.int64) * 5_000  # 5 µs per launch, 1 µs kernels
    end = launch + 1_000
    assert not OH.queue_delay_ns(launch, end).any()


@given(st.integers(1, 50), st.integers(2, 20))
def test_queue_delay_keeps_host_within_depth_of_gpu(depth: int, kernel_us: int) -> None:
    """GPU-bound: kernels longer than launches; after the delay no launch returns before the kernel
    ``depth`` launches earlier has ended, and the delay never decreases."""
    n = 4 * depth + 10
    launch = np.arange(n, dtype=np.int64) * 1_000
    end = np.cumsum(np.full(n, kernel_us * 1_000, dtype=np.int64))  # back-to-back kernels on one stream
    d = OH.queue_delay_ns(launch, end, depth=depth)
    assert (np.diff(d) >= 0).all() and (d >= 0).all()
    assert (launch[depth:] + d[depth:] >= end[:-depth]).all()
    assert not d[:depth].any()


def test_stack_and_memory_events_are_evidence_and_cost() -> None:
    ts = [i * 100_000 for i in range(30)]
    tables = _tables(ts, [1_000] * 30, [0] * 30)
    plain = OH.estimate_tables(*tables)
    more = OH.estimate_tables(*tables, n_memory=np.array([40.0]), n_python=np.array([60.0]))
    assert not plain.evidence.with_stack and not plain.evidence.profile_memory
    assert more.evidence.with_stack and more.evidence.profile_memory
    assert more.per_step_ns[0] > plain.per_step_ns[0]


calls_st = st.lists(st.tuples(st.integers(0, 10_000_000), st.integers(0, 200_000)), max_size=30)


@given(events, calls_st)
@pytest.mark.slow
def test_host_free_time_is_the_time_between_op_starts_outside_calls(evs: list[tuple[int, int, int]],
                                                                     cs: list[tuple[int, int]]) -> None:
    """host_free_ns (issue 31): never negative, without calls exactly the span from the first op start to the last,
    and a runtime call added anywhere never adds host time to any op."""
    ts, dur, tid = map(list, zip(*evs))
    ops, no_calls, _ = _tables(ts, dur, tid)
    calls = pd.DataFrame({S.NAME: ["cudaLaunchKernel"] * len(cs),
                          S.TS: np.array([c[0] for c in cs], dtype=np.int64),
                          S.DUR: np.array([c[1] for c in cs], dtype=np.int64), S.TID: np.zeros(len(cs), dtype=np.int64)})
    bare, with_calls = OH.host_free_ns(ops, no_calls), OH.host_free_ns(ops, calls)
    assert (with_calls >= 0).all() and (with_calls <= bare).all()
    assert bare.sum() == max(ts) - min(ts)

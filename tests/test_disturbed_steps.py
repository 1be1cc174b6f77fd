"""Disturbed steps (issue 31): a profiled step whose host ran slower than the trace's quickest-paced step, and longer,
is left out of the step figures (pipeline.figures.steady_steps); a joint replay leaves out, on every rank, each
step any rank's host lost (figures.joint_steps)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, strategies as st

from habitat_trace.ingest import schema as S
from habitat_trace.pipeline.figures import (DISTURBED_PACE, MIN_PACE_LAUNCHES, disturbed_steps, joint_steps,
                                            steady_iteration, steady_steps, step_pace)

OPS = 200  # ops a step, each with one launch call


def host(paces: list[float], numbers: list[int] | None = None, op_ns: int = 10_000, launch_ns: int = 5_000,
         gpu_wait_ns: list[int] | None = None, busy_share: float = 0.2) -> SimpleNamespace:
    """Tables-like steps, ops, launch calls and GPU rows: step i's ops and launches last ``paces[i]`` times the base,
    back to back, plus ``gpu_wait_ns[i]`` at the step's end (a blocking wait: host pace unchanged, step longer); its
    GPU is busy ``busy_share`` of the step (one kernel)."""
    numbers = numbers if numbers is not None else list(range(1, len(paces) + 1))
    waits = gpu_wait_ns or [0] * len(paces)
    steps, ops, calls, kernels, t = [], [], [], [], 0
    for i, (pace, number) in enumerate(zip(paces, numbers)):
        start = t
        for _ in range(OPS):
            d_op, d_call = int(op_ns * pace), int(launch_ns * pace)
            ops.append({S.NAME: "aten::mm", S.TS: t, S.END: t + d_op, S.STEP: i})
            calls.append({S.NAME: "cudaLaunchKernel", S.TS: t + 1, S.END: t + 1 + d_call, S.STEP: i})
            t += d_op + 100
        t += waits[i]
        steps.append({S.STEP_NUMBER: number, S.TS: start, S.END: t, S.DUR: t - start})
        kernels.append({S.TS: start, S.END: start + int(busy_share * (t - start)), S.STEP: i})
    return SimpleNamespace(steps=pd.DataFrame(steps), ops=pd.DataFrame(ops), calls=pd.DataFrame(calls),
                           gpu=pd.DataFrame(kernels))


def test_a_slower_paced_longer_step_is_disturbed() -> None:
    assert steady_steps(host([1.0, 1.6])).tolist() == [True, False]
    assert steady_steps(host([1.6, 1.0, 1.05])).tolist() == [False, True, True]
    assert disturbed_steps(host([1.6, 1.0, 1.05], numbers=[3, 4, 5])) == frozenset({3})


def test_where_the_gpu_sets_the_step_every_step_is_read() -> None:
    """A full launch queue blocks the launches of the steps that wait for it: their pace is the GPU's, not the
    host's (Lambda's GPU-bound BERT TF32 steps: 355 and 305 ms profiled, 323 ms of kernels each)."""
    assert steady_steps(host([1.0, 1.6], busy_share=0.99)).all()
    assert steady_steps(host([1.0, 1.6], busy_share=0.5)).tolist() == [True, False]


def test_steps_within_the_pace_tolerance_are_all_read() -> None:
    assert steady_steps(host([1.0, 0.98 * DISTURBED_PACE])).all()


def test_a_longer_step_at_the_same_pace_is_not_disturbed() -> None:
    """The GPU held it (a blocking wait), not the host: nothing in the trace says the real loop is not like it."""
    assert steady_steps(host([1.0, 1.0], gpu_wait_ns=[0, 5_000_000])).all()


def test_a_slower_paced_shorter_step_is_not_disturbed() -> None:
    """Slower per op but shorter (the quick-paced step lost its time elsewhere): every step is read."""
    assert steady_steps(host([1.0, 1.5], gpu_wait_ns=[10_000_000, 0])).all()


def test_the_profilers_first_step_stays_out_and_one_step_is_read() -> None:
    assert steady_steps(host([1.0, 1.0, 1.6], numbers=[0, 1, 2])).tolist() == [False, True, False]
    assert steady_steps(host([1.7])).tolist() == [True]  # the only step there is


def test_too_few_launches_leave_the_launch_pace_unmeasured() -> None:
    few = host([1.0, 1.0])
    few.calls = few.calls.iloc[: MIN_PACE_LAUNCHES - 1]
    assert np.isnan(step_pace(few, np.array([True, True]))[1]).all()


def test_a_joint_replay_leaves_out_a_step_any_rank_lost() -> None:
    ranks = [host([1.0, 1.0, 1.0], numbers=[2, 3, 4]), host([1.0, 1.7, 1.0], numbers=[2, 3, 4]),
             host([1.0, 1.0, 1.0], numbers=[2, 3, 4])]
    lost = frozenset().union(*(disturbed_steps(r) for r in ranks))
    assert lost == {3}
    for r in ranks:
        assert joint_steps(r, lost).tolist() == [True, False, True]
    everything = frozenset({2, 3, 4})  # every step lost on some rank: all steady steps, the same on every rank
    assert all(joint_steps(r, everything).all() for r in ranks)


@given(st.lists(st.floats(0.5, 3.0), min_size=2, max_size=5), st.floats(0.3, 4.0))
def test_a_uniform_host_clock_leaves_the_steps_read_unchanged(paces: list[float], speed: float) -> None:
    """The paces are ratios between steps: a replay's or a target's uniform host clock reads the same steps."""
    assume(all(abs(p / min(paces) - DISTURBED_PACE) > 0.01 for p in paces))  # integer ns: not at the threshold
    base = steady_steps(host(paces))
    scaled = steady_steps(host(paces, op_ns=int(10_000 * speed), launch_ns=int(5_000 * speed)))
    assert base.tolist() == scaled.tolist()
    assert base.any()


def test_a_replay_the_gpu_sets_reads_every_step() -> None:
    """Lambda's BERT-base AMP step on a Quadro RTX 8000 (ms): the origin's disturbed step left out where the replay is
    host-bound, but on the target the two steps are 1090 and 760 ms over 757 and 759 ms of kernels: a launch queue
    that one step fills and the next waits for, whose period is their mean."""
    keep = np.array([True, False])
    gpu_bound = pd.DataFrame({"number": [2, 3], "cpu_ns": [1090e6, 760e6], "gpu_busy_ns": [757e6, 759e6]})
    assert steady_iteration(gpu_bound, keep=keep)[0] == pytest.approx(925.0)
    host_bound = pd.DataFrame({"number": [2, 3], "cpu_ns": [66e6, 152e6], "gpu_busy_ns": [14e6, 14e6]})
    assert steady_iteration(host_bound, keep=keep)[0] == pytest.approx(66.0)
    assert steady_iteration(host_bound)[0] == pytest.approx(109.0)  # no keep: every steady step
    # the stalled LLaMA recording on 48 SMs: the undisturbed step is GPU-paced there, the disturbed ones still lose
    # their host time: they stay out
    slow_gpu = pd.DataFrame({"number": [3, 4, 5], "cpu_ns": [90e6, 41e6, 92e6], "gpu_busy_ns": [40e6, 40e6, 40e6]})
    assert steady_iteration(slow_gpu, keep=np.array([False, True, False]))[0] == pytest.approx(41.0)

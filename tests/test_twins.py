"""Kernels launched before the profiling window opened (no launch, no op in the trace) take the op facts of their twin:
the same kernel (name, grid, block) launched in the window (scale/facts.twins).

Regression: Lambda's BERT-base TF32 step at batch 172 (H100, 2026-11-27) opens its window on 1,015 such kernels (270
ms); they were priced by the class defaults (1.13x to a B200, where their twins ran 1.8-2.2x), and the first step's
sync waited for them: B200 iteration 245 ms for 193 ms of GPU busy time, 200 ms with twins.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.scale import engine
from habitat_trace.scale.facts import kernel_facts, twins
from habitat_trace.scale.specs import load_catalog
from tests.conftest import DATA

# the MLP fixture with its first ProfilerStep's host events (ops, runtime calls, the step) taken out: its 67 kernels
# are what Kineto records of a step launched before the window opened (tests/data/README.md)
LONE = DATA / "mlp_window_opened_on_running_gpu.pt.trace.json.gz"
WHOLE = DATA / "emit_mlp_h100.pt.trace.json.gz"
KEY = (S.NAME, S.GRID_X, S.GRID_Y, S.GRID_Z, S.BLOCK_X, S.BLOCK_Y, S.BLOCK_Z)


@pytest.fixture(scope="module")
def lone():
    return load(LONE)


def test_every_kernel_without_its_op_takes_a_twin_of_the_same_launch(lone) -> None:
    g, src = lone.gpu, twins(lone)
    op = g[S.OP].to_numpy()
    moved = src != np.arange(len(g))
    assert moved.sum() == (op < 0).sum() == 67
    assert (op[src[moved]] >= 0).all()
    for col in KEY:
        assert (g[col].to_numpy()[moved] == g[col].to_numpy()[src[moved]]).all(), col


def test_a_trace_whose_kernels_all_have_ops_is_its_own_twin() -> None:
    trace = load(WHOLE)
    assert (twins(trace) == np.arange(len(trace.gpu))).all()


@pytest.mark.parametrize("target", ["B200", "A100", "H200"])  # two cross-chip laws and the same-chip wave law
def test_a_lone_kernel_moves_as_its_twin(lone, target: str) -> None:
    cat = load_catalog()
    origin, tgt = cat.resolve("H100 SXM5 80GB"), cat.resolve(target)
    g, src = lone.gpu, twins(lone)
    moved = np.flatnonzero(src != np.arange(len(g)))
    pred = engine.predict(lone, origin, tgt)
    ratio = pred.dur_ns / g[S.DUR].to_numpy()
    # same kernel, same launch: the same speed-up (durations round to 1 ns; kernels of a few µs)
    assert ratio[moved] == pytest.approx(ratio[src[moved]], rel=0.02)
    assert all(engine.TWIN_REASON in r for r in pred.reason[moved])
    facts = kernel_facts(lone, origin, tgt)
    assert (facts.gamma[moved] == facts.gamma[src[moved]]).all()


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(1, 10_000), st.booleans()),
                min_size=1, max_size=40))
def test_twins_property(rows: list[tuple[int, int, int, bool]]) -> None:
    """Any kernel: a row with an op is its own twin; a row without one takes, if any exists, a row with an op of the
    same name, grid and block whose origin time is nearest to its own."""
    name, grid, dur, has_op = (list(c) for c in zip(*rows))
    gpu = pd.DataFrame({S.NAME: [f"k{n}" for n in name], S.GRID_X: grid, S.GRID_Y: 1, S.GRID_Z: 1, S.BLOCK_X: 128,
                        S.BLOCK_Y: 1, S.BLOCK_Z: 1, S.DUR: dur, S.OP: [i if h else -1 for i, h in enumerate(has_op)]})

    class Small:  # facts.twins reads only the GPU table (ingest.trace.derived calls it on any such object)
        pass
    trace = Small()
    trace.gpu = gpu  # type: ignore[attr-defined]
    src = twins(trace)
    for i, (n, gr, d, h) in enumerate(rows):
        same = [j for j, r in enumerate(rows) if r[3] and r[0] == n and r[1] == gr]
        if h or not same:
            assert src[i] == i
        else:
            assert src[i] in same
            assert abs(rows[src[i]][2] - d) == min(abs(rows[j][2] - d) for j in same)


@given(st.lists(st.tuples(st.sampled_from(["k0", "k1", "k,2", ""]), st.integers(-1, 3), st.integers(0, 2**40),
                          st.integers(1, 3)), min_size=1, max_size=60))
def test_launch_codes_group_as_the_launch_key(rows: list[tuple[str, int, int, int]]) -> None:
    """Issue 34: _launch_codes (factorized names, then each column's codes paired) gives two rows one code exactly when
    their name, grid and block are equal, as the MultiIndex factorize it replaced did."""
    from habitat_trace.scale.facts import _launch_codes
    name, gx, gy, bx = (list(c) for c in zip(*rows))
    gpu = pd.DataFrame({S.NAME: name, S.GRID_X: gx, S.GRID_Y: gy, S.GRID_Z: 1, S.BLOCK_X: bx, S.BLOCK_Y: 1,
                        S.BLOCK_Z: 1})
    code = _launch_codes(gpu)
    assert code.dtype == np.int64
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (code[i] == code[j]) == (rows[i] == rows[j])

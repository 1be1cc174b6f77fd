"""The per-trace and per-target work issue 34 vectorized (branch speed3), each against the code it replaced (kept here
verbatim as the reference): the same values, codes and order, on real fixtures and on hypothesis inputs."""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.ingest import columns as col
from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.pipeline import Options, Run
from habitat_trace.scale.facts import per_op
from habitat_trace.timeline import joint, links, overhead
from habitat_trace.timeline.intervals import union_length
from habitat_trace.timeline.steps import StepFigures, replayed_step_figures
from tests.conftest import DATA, MLP_FIXTURE

FIXTURES = [MLP_FIXTURE, DATA / "a100_nccl_step5.json.gz", DATA / "resnet50_cl_bn_step.pt.trace.json.gz",
            DATA / "amd_mi250_minitoy_rocm6.json.gz"]


def _per_op_loop(op: np.ndarray, of: Any, columns: tuple[np.ndarray, ...]) -> dict[int, Any]:
    out: dict[int, Any] = {}
    seen: dict[tuple[int, ...], Any] = {}
    for o in np.unique(op[op >= 0]).tolist():
        key = tuple(id(c[o]) for c in columns)
        if key not in seen:
            seen[key] = of(o)
        out[o] = seen[key]
    return out


@given(st.lists(st.integers(-1, 30), max_size=60), st.lists(st.integers(0, 3), min_size=31, max_size=31),
       st.lists(st.integers(0, 2), min_size=31, max_size=31))
def test_per_op_calls_of_once_per_key_on_its_lowest_op(op: list[int], a: list[int], b: list[int]) -> None:
    pool = [[k] for k in range(4)]  # shared objects, as ingest shares equal shape lists
    names = np.array([f"n{k}" for k in a], dtype=object)
    dims = np.empty(31, dtype=object)
    dims[:] = [pool[k] for k in b]
    arr = np.array(op, dtype=np.int64)
    calls: list[list[int]] = [[], []]
    got = per_op(arr, lambda o: calls[0].append(o) or (o, names[o]), (names, dims))
    want = _per_op_loop(arr, lambda o: calls[1].append(o) or (o, names[o]), (names, dims))
    assert got == want and sorted(calls[0]) == calls[1]


def _stream_codes_loop(gpu: pd.DataFrame) -> tuple[np.ndarray, dict[tuple[int, int], int]]:
    keys = list(zip(gpu[S.DEVICE].tolist(), gpu[S.STREAM].tolist()))
    codes: dict[tuple[int, int], int] = {}
    out = np.fromiter((codes.setdefault(k, len(codes)) for k in keys), dtype=np.int64, count=len(keys))
    return out, codes


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-1, 40)), max_size=50))
def test_stream_codes_number_pairs_in_order_of_first_appearance(pairs: list[tuple[int, int]]) -> None:
    gpu = pd.DataFrame({S.DEVICE: np.array([p[0] for p in pairs], dtype=np.int64),
                        S.STREAM: np.array([p[1] for p in pairs], dtype=np.int64)})
    got, want = links.stream_codes(gpu), _stream_codes_loop(gpu)
    assert got[0].tolist() == want[0].tolist() and list(got[1].items()) == list(want[1].items())


@given(st.lists(st.one_of(st.integers(-2**70, 2**70), st.sampled_from(["7", "stream 7", "", "1"])), max_size=40))
def test_strings_are_str_of_each_value(values: list[Any]) -> None:
    got = col.strings(values)
    assert got.dtype == object and got.tolist() == [str(v) for v in values]


def _queue_delays_groupby(tables: Any, timeline: Any) -> tuple[np.ndarray, np.ndarray]:
    g, calls = tables.gpu, tables.calls
    launch = g[S.LAUNCH].to_numpy()
    has = launch >= 0
    calls_used, first = np.unique(launch[has], return_index=True)
    if len(calls_used) <= overhead.LAUNCH_QUEUE_DEPTH:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(has)[first]
    end = pd.Series(timeline.gpu_end_ns[has]).groupby(launch[has]).max().reindex(calls_used).to_numpy()
    call_ev = calls[S.EVENT].to_numpy()[calls_used]
    issued = timeline.ts_ns[call_ev] + timeline.dur_ns[call_ev]
    order = np.argsort(issued, kind="stable")
    rows, issued, end, used = rows[order], issued[order], end[order], calls_used[order]
    stream = (g[S.DEVICE].to_numpy()[rows] << 32) + g[S.STREAM].to_numpy()[rows]
    total = overhead.queue_delay_ns(issued, end, stream)
    steps = np.diff(total, prepend=0)
    hit = np.flatnonzero(steps > 0)
    return calls[S.END].to_numpy()[used[hit]], steps[hit]


def _step_figures_rows(trace: Any, timeline: Any) -> pd.DataFrame:
    gpu = pd.DataFrame({S.TS: timeline.gpu_start_ns, S.END: timeline.gpu_end_ns, S.STEP: trace.gpu[S.STEP].to_numpy()})
    steps = trace.steps
    start, end, step_col = gpu[S.TS].to_numpy(), gpu[S.END].to_numpy(), gpu[S.STEP].to_numpy()
    if len(steps) == 0:
        keys = [(S.NONE, -1, int(end.max() - start.min()) if len(gpu) else 0)]
        step_col = np.full(len(gpu), S.NONE)
    else:
        keys = list(zip(range(len(steps)), steps[S.STEP_NUMBER].tolist(),
                        timeline.dur_ns[steps[S.EVENT].to_numpy()].tolist()))
    by_step = np.argsort(step_col, kind="stable")
    sorted_steps = step_col[by_step]
    rows = []
    for row, number, cpu in keys:
        m = by_step[np.searchsorted(sorted_steps, row, "left"):np.searchsorted(sorted_steps, row, "right")]
        s, e = start[m], end[m]
        rows.append({"step": row, "number": int(number), "cpu_ns": int(cpu), "gpu_busy_ns": union_length(s, e),
                     "gpu_span_ns": int(e.max() - s.min()) if len(m) else 0, "kernels": len(m)})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: Path(p).name)
def test_replay_figures_and_queue_delays_as_before(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overhead, "LAUNCH_QUEUE_DEPTH", 4)  # a queue that fills on a small trace
    monkeypatch.setattr(overhead, "queue_delay_ns", partial(overhead.queue_delay_ns, depth=4))
    options = Options.of()
    run = Run.open([Path(path)], options)
    delayed = 0
    for target in (None, options.targets("A100")[0]):
        rr = run.replay(target).ranks[0]
        tables, timeline = rr.tables, rr.timeline
        # and the same rows with every other launched row given its predecessor's call (a CUDA graph's launch runs
        # many kernels: a call's slot frees at its last kernel's end, not its first's)
        launch = tables.gpu[S.LAUNCH].to_numpy().copy()
        rows = np.flatnonzero(launch >= 0)
        launch[rows[1::2]] = launch[rows[:-1:2]]
        grouped = replace(tables, gpu=tables.gpu.assign(**{S.LAUNCH: launch}))
        for t in (tables, grouped):
            for shift in (0, 10**6):  # the replayed ends, and later ones (a queue that fills)
                tl = replace(timeline, gpu_end_ns=timeline.gpu_end_ns + shift * (np.arange(len(launch)) % 3))
                got, want = joint.queue_delays(t, tl), _queue_delays_groupby(t, tl)
                assert [a.tolist() for a in got] == [a.tolist() for a in want]
                delayed += len(got[0])
                figures = replayed_step_figures(t, tl)
                assert isinstance(figures, StepFigures)
                pd.testing.assert_frame_equal(figures.table, _step_figures_rows(t, tl))
    assert delayed  # a queue filled somewhere


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: Path(p).name)
def test_blocking_calls_own_row_is_each_calls_first(path: Path) -> None:
    t = load(path)
    launch = t.gpu[S.LAUNCH].to_numpy()
    want: dict[int, int] = {}
    for row, call in zip(np.flatnonzero(launch >= 0), launch[launch >= 0]):
        want.setdefault(int(call), int(row))
    _, own = links.blocking_calls(t)
    assert list(own.items()) == list(want.items())


def test_settle_of_a_lone_rank_is_a_fresh_empty_table() -> None:
    """Issue 34 (branch speed5): settle of one rank copies a module-level empty table instead of building one (0.5 ms,
    five times a target of scale --to all); the copy is the table it built, and a caller's change to it stays its
    own."""
    built = pd.DataFrame(columns=["rank", "row", "key", "collective"]).assign(transfer_ns=0, wait_ns=0)
    first = joint.settle([object()])  # type: ignore[list-item]  # a lone rank's summary is never read
    pd.testing.assert_frame_equal(first.collectives, built, check_index_type=True, check_column_type=True)
    assert (first.passes, first.warnings) == (0, ())
    first.collectives["x"] = 1
    pd.testing.assert_frame_equal(joint.settle([object()]).collectives, built)  # type: ignore[list-item]

"""The joint replay's fixed point (timeline/joint.py): it settles on real 2-rank FSDP traces, and a cross-rank cycle
stops with one warning instead of growing without end."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import from_document, load
from habitat_trace.pipeline import Options, Run
from habitat_trace.scale.specs import load_catalog
from habitat_trace.timeline.joint import HORIZON_FACTOR, MAX_PASSES
from tests.dist_helpers import ddp_trace

CATALOG = load_catalog(None)
FSDP = Path(__file__).parent / "data" / "fsdp_mlp_h100x2"


def ends_together(replay: Any) -> bool:
    """Every matched collective ends at the same ns on every rank of the replay."""
    c = replay.collectives
    end = np.array([int(replay.ranks[r].timeline.gpu_end_ns[i]) for r, i in zip(c["rank"], c["row"])])
    return bool((c.assign(end=end).groupby("key")["end"].nunique() == 1).all())


@pytest.mark.slow
def test_fsdp_joint_replay_settles_where_waits_grew_1000x_a_pass_to_overflow() -> None:
    """Two ProfilerSteps of a 2-rank FSDP MLP on an H100 pair (all-gather and reduce-scatter on two streams): the
    durations-iterating fixed point grew every wait ~1000x a pass until OverflowError in schedule."""
    replay = Run([load(FSDP / f"rank{r}.pt.trace.json.gz") for r in (0, 1)], Options(CATALOG)).baseline()
    assert not [w for w in replay.warnings if "joint replay" in w]
    assert replay.passes < MAX_PASSES
    assert len(replay.collectives) == 2 * 96 and ends_together(replay)
    assert (replay.collectives["wait_ns"] >= 0).all()
    for r in replay.ranks:  # the recorded steps last 64-69 ms; the replay stays of that order
        assert 20 < r.headline.iteration_ms < 150


def swap_seq(doc: dict[str, Any], order: list[int]) -> dict[str, Any]:
    """The document with its collectives' ``Seq`` s renamed order[s] (on the launching op and on the kernel)."""
    out = copy.deepcopy(doc)
    for e in out["traceEvents"]:
        if "Seq" in e.get("args", {}):
            e["args"]["Seq"] = order[e["args"]["Seq"]]
    return out


@settings(max_examples=20, deadline=None)
@given(steps=st.integers(2, 4), gemm_us=st.lists(st.floats(100, 3000), min_size=2, max_size=2),
       nccl_us=st.floats(50, 2000), data=st.data())
@pytest.mark.slow
def test_a_cross_rank_cycle_stops_with_one_warning_never_overflows(steps: int, gemm_us: list[float],
                                                                   nccl_us: float, data: Any) -> None:
    """Rank 1 issuing the matched collectives in another order is a cycle (no layout ends them together): the
    replay stops (at the horizon, or after MAX_PASSES where the cycle grows slowly) with one warning and finite
    waits; in the same order it settles without one."""
    order = data.draw(st.permutations(list(range(steps))))
    docs = [ddp_trace(rank=r, steps=steps, gemm_us=gemm_us[r], nccl_us=nccl_us, nelems=1_000_000) for r in (0, 1)]
    docs[1] = swap_seq(docs[1], order)
    traces = [from_document(f"rank{r}.json", d) for r, d in enumerate(docs)]
    replay = Run(traces, Options(CATALOG)).baseline()
    stopped = [w for w in replay.warnings if w.startswith("joint replay stopped")]
    wait = replay.collectives["wait_ns"].to_numpy()
    span = max(int(t.gpu[S.END].max()) - int(t.calls[S.TS].min()) for t in traces)
    assert (wait >= 0).all() and (wait <= 2 * HORIZON_FACTOR * 2 * span).all()
    if order == sorted(order):
        assert not stopped and ends_together(replay)
    else:
        assert len(stopped) == 1 and "\n" not in stopped[0] and replay.passes <= MAX_PASSES

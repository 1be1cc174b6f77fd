"""A rank's summary for the joint replay (timeline/summary.py) lays its collectives out exactly as schedule does: on
the real multi-rank fixtures, at random collective durations and floors, on the recorded and a de-profiled clock."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from habitat_trace.ingest.trace import load
from habitat_trace.pipeline import Options, Run
from habitat_trace.scale.engine import predict
from habitat_trace.scale.specs import load_catalog
from habitat_trace.timeline.schedule import NO_FLOOR, schedule
from habitat_trace.timeline.summary import summarize

CATALOG = load_catalog(None)
DATA = Path(__file__).parent / "data"
RANKS = [DATA / "fsdp_mlp_h100x2" / "rank0.pt.trace.json.gz", DATA / "dist_mlp_h100x2" / "ddp-rank1.pt.trace.json.gz",
         DATA / "a100_nccl_step5.json.gz"]
_CACHE: dict = {}


def rank(i: int, target: str):
    """(tables, predicted durations, host clock) of fixture ``i`` on ``target``."""
    if (i, target) not in _CACHE:
        r = Run([load(RANKS[i])], Options(CATALOG)).ranks[0]
        _CACHE[(i, target)] = (r.tables, predict(r.tables, r.origin, CATALOG.resolve(target)).dur_ns, r.clock.clock)
    return _CACHE[(i, target)]


@settings(max_examples=15, deadline=None)
@given(i=st.integers(0, len(RANKS) - 1), target=st.sampled_from(["H100", "A100", "T4"]), deprofiled=st.booleans(),
       data=st.data())
def test_summary_layout_equals_schedule(i: int, target: str, deprofiled: bool, data: st.DataObject) -> None:
    tables, dur, clock = rank(i, target)
    clock = clock if deprofiled else None
    s = summarize(tables, dur, clock)
    rows = s.rows
    assert len(rows) > 0
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    d = dur.copy()
    # collectives shorter (a transfer: the least over the ranks) or longer than predicted
    d[rows] = np.maximum(1, (dur[rows] * rng.uniform(0.1, 3.0, len(rows))).astype(np.int64))
    floor = np.full(len(d), NO_FLOOR, dtype=np.int64)
    plain, _ = schedule(tables, d, clock)
    if data.draw(st.booleans()):  # floors: some collectives held past their end, by up to a few ms
        held = rows[rng.random(len(rows)) < 0.5]
        floor[held] = plain[held] + d[held] + rng.integers(-200_000, 3_000_000, len(held))
    lay = s.layout(d[rows], floor[rows])
    starts, _ = schedule(tables, d, clock, floor)
    assert np.array_equal(lay.starts, starts[rows])
    if (floor == NO_FLOOR).all():
        assert lay.first == int(starts.min()) and lay.last == int((starts + d).max())


@pytest.mark.parametrize("i", range(len(RANKS)))
def test_summary_is_small(i: int) -> None:
    """The summary keeps a few values per collective, not the trace."""
    tables, dur, clock = rank(i, "A100")
    s = summarize(tables, dur, clock)
    assert s.nbytes < 2_000 * len(s.rows) + 20_000

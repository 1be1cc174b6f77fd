"""Hypothesis properties of emit: exact µs text, a monotone CPU map, and replay invariants under
arbitrary per-kernel factors (deterministic under CI, see conftest)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import new_violations
from habitat_trace.timeline.replay import cpu_map, replay
from habitat_trace.timeline.schedule import Breaks
from habitat_trace.emit.numbers import us_fragments, us_text, us_texts
from habitat_trace.ingest import columns as col
from habitat_trace.ingest import load
from habitat_trace.scale.prediction import FALLBACK, Prediction
from tests.conftest import DATA
from tests.emit_helpers import spec
from tests.test_replay import _invariants

FIXTURE = DATA / "emit_mlp_h100.pt.trace.json.gz"
# float64 resolves 0.5 ns up to 2**51 ns (26 days of µs timestamps); epoch-based Kineto times are larger
# but come from floats already, so they round-trip through the same float.
EXACT_NS = 2**51


@given(st.lists(st.integers(-EXACT_NS, EXACT_NS), min_size=1, max_size=50))
def test_us_text_round_trips_to_the_nanosecond(ns: list[int]) -> None:
    arr = np.array(ns, dtype=np.int64)
    frags = us_fragments(arr)
    texts = [us_text(v) for v in ns]
    assert all(len(t.split(b".")[1]) == 3 for t in texts)
    back = col.us_to_ns(np.array([float(t) for t in texts]))
    assert back.tolist() == ns
    assert len(frags) == len(ns)


@given(st.lists(st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(-10**6, 10**6),
                          st.sampled_from([0, 999, 1000, 10**15 - 1, 10**15, 2**63 - 1, -2**63])), max_size=50))
@example([-2**63, -1500, 1500])
@example([999_999_999, 1_000_000_000, 999_999_999_999, 10**12, 10**15 + 7, -(10**13) - 1, 2**63 - 1])
def test_us_texts_is_us_text_of_each(ns: list[int]) -> None:
    """The vectorized write of a whole column (digits laid out per digit count) against the one-number format, int64's
    minimum included (it has no absolute value in int64: until 2026-11-27 it came out as b"--9223372036854776.192")."""
    assert us_texts(np.array(ns, dtype=np.int64)) == [us_text(v) for v in ns]


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 1000), st.integers(-2000, 2000)), max_size=8),
       st.lists(st.integers(0, 20000), min_size=2, max_size=60))
def test_cpu_map_is_monotone(waits: list[tuple[int, int, int]], times: list[int]) -> None:
    ws, te, new = [], [], []
    t, shift = 0, 0
    for gap, length, change in waits:  # built the way schedule._wait builds them
        start = t + gap
        end = start + length
        new_end = max(start + shift + length + change, start + shift)
        ws.append(start), te.append(end), new.append(new_end)
        t, shift = end, new_end - end
    out = cpu_map(np.sort(np.array(times)), Breaks(np.array(ws, dtype=np.int64), np.array(te, dtype=np.int64),
                                                  np.array(new, dtype=np.int64)))
    assert (np.diff(out) >= 0).all()


_TRACE = load(FIXTURE)


@settings(max_examples=25)
@given(st.integers(0, 2**32 - 1))
@pytest.mark.slow
def test_replay_invariants_under_random_factors(seed: int) -> None:
    rng = np.random.default_rng(seed)
    old = _TRACE.gpu["dur_ns"].to_numpy()
    dur = np.maximum((old * rng.uniform(0.05, 4.0, len(old))).astype(np.int64), 1)
    n = len(old)
    pred = Prediction(spec(), spec("L4", 58), dur, np.full(n, FALLBACK, dtype=object), np.full(n, "", dtype=object))
    tl = replay(_TRACE, pred)
    _invariants(_TRACE, tl)
    new_events = [dict(e) for e in _TRACE.events]
    for i in np.flatnonzero(tl.ts_ns != np.iinfo(np.int64).min).tolist():
        new_events[i]["ts"] = tl.ts_ns[i] / 1000
        if tl.dur_ns[i] != np.iinfo(np.int64).min:
            new_events[i]["dur"] = tl.dur_ns[i] / 1000
    errors, _ = new_violations(_TRACE.events, new_events)
    assert errors == []

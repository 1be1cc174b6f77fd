"""The chunk-wide fast paths of ingest (fields.EventFields's takers, event_times, the nesting pre-check) give exactly
what the obvious per-event code gives, on clean values and on junk (strings, bools, nulls, huge ints, non-objects)."""
from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from habitat_trace.ingest import columns as col
from habitat_trace.ingest import rules
from habitat_trace.ingest.fields import EventFields
from habitat_trace.ingest.tables import NO_TIME, event_times

junk = st.sampled_from([None, True, "12", "x", 2**70, 2**1100, float("nan"), float("inf"), [1], {"a": 1}])
number = st.one_of(st.integers(-10**6, 10**13), st.floats(-1e6, 5e12, allow_nan=False), st.just(1.7e15 + 0.25))
ident = st.one_of(st.integers(0, 5), st.sampled_from(["", "p", "stream 7", "1"]))
name = st.sampled_from(["", "a", "cudaLaunchKernel", "ProfilerStep#1"])
keys = {"ph": st.sampled_from(["X", "X", "M", "s", "f", "t", "i", "B"]), "ts": number, "dur": number, "pid": ident,
        "tid": ident, "name": name, "cat": st.sampled_from(["kernel", "cpu_op"])}


@st.composite
def events(draw: Any, junk_p: float) -> list[Any]:
    out: list[Any] = []
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 49)) == 0:
            out.append(draw(st.sampled_from([5, "x", None])))
            continue
        e = {}
        for key, value in keys.items():
            if draw(st.integers(0, 9)):  # a key is absent one time in ten
                e[key] = draw(junk) if draw(st.floats(0, 1)) < junk_p else draw(value)
        out.append(e)
    return out


any_events = st.sampled_from([0.0, 0.05, 0.3]).flatmap(events)


def _get(events: list[Any], rows: list[int], key: str, default: Any = None) -> list[Any]:
    return [events[i].get(key, default) for i in rows]


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # the per-row code on a 2**70 µs time
@settings(max_examples=300, deadline=None)
@given(any_events, st.data())
@example([{"ph": "X", "ts": 1, "pid": None}, {"ph": "X", "ts": True}], None)
def test_takers_equal_the_per_row_reads(evs: list[Any], data: Any) -> None:
    """Regression guard for the whole-chunk columns: a null pid is "None" while an absent one is "", a bool time is
    NaN only where the per-row conversion made it so, a name that is not a string is str() of it."""
    f = EventFields.of(evs)
    dicts = [i for i, e in enumerate(evs) if type(e) is dict]
    rows = sorted(data.draw(st.sets(st.sampled_from(dicts)))) if dicts and data is not None else dicts
    idx = np.array(rows, dtype=np.int64)
    for key in ("ts", "dur"):
        assert f.ns_at(key, idx).tolist() == col.us_to_ns(col.floats(_get(evs, rows, key))).tolist()
    for key in ("pid", "tid"):
        assert f.strings_at(key, idx, evs).tolist() == col.strings(_get(evs, rows, key, "")).tolist()
    column, names = f.names_at(idx)
    expected = [n if type(n) is str else str(n) for n in _get(evs, rows, "name", "")]
    assert names == expected and list(column) == expected and column.dtype == col.text([]).dtype


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")
@settings(max_examples=300, deadline=None)
@given(any_events)
def test_event_times_equal_the_per_event_rule(evs: list[Any]) -> None:
    ph = [e.get("ph") if type(e) is dict else None for e in evs]
    ts = col.us_to_ns(col.floats([e.get("ts") if type(e) is dict and p != "M" else None for e, p in zip(evs, ph)]))
    dur = col.us_to_ns(col.floats([e.get("dur") if type(e) is dict and p == "X" else None for e, p in zip(evs, ph)]))
    dur[ts == NO_TIME] = NO_TIME
    got = event_times(evs)
    assert got[0].tolist() == ts.tolist() and got[1].tolist() == dur.tolist()


@st.composite
def nested(draw: Any) -> list[dict[str, Any]]:
    """Slices that mostly nest on two tracks, some ending a little (within or past the tolerance) after their
    parent, at relative and at epoch times."""
    base = draw(st.sampled_from([0.0, 4457322950944.587, 1.7e15, -1000.0]))
    out: list[dict[str, Any]] = []
    stack = [(0.0, 100.0)]
    for _ in range(draw(st.integers(1, 30))):
        s, e = stack[-1]
        a = draw(st.floats(s, e, allow_nan=False))
        b = draw(st.floats(a, e, allow_nan=False)) + draw(st.sampled_from([0, 0, 0, 0.0004, 0.0006, 0.25, 5]))
        out.append({"ph": "X", "pid": 1, "tid": draw(st.sampled_from([1, 1, 2])), "ts": base + a, "dur": b - a})
        if draw(st.booleans()):
            stack.append((a, b))
        elif len(stack) > 1 and draw(st.booleans()):
            stack.pop()
    return out


@settings(max_examples=300, deadline=None)
@given(nested())
def test_nesting_precheck_misses_no_crossing(evs: list[dict[str, Any]]) -> None:
    """rules._maybe_crossing hands ``_nesting`` only the tracks where it may find a violation: the same violations
    as the loop over every stacked track."""
    fast = [str(v) for v in rules.check_events(evs)]
    with mock.patch.object(rules, "_maybe_crossing", lambda tracks, *_: tracks):
        assert fast == [str(v) for v in rules.check_events(evs)]


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # the per-row code on a 2**70 µs time
@settings(max_examples=150, deadline=None)
@given(any_events, st.lists(st.integers(0, 12), max_size=4), st.booleans())
def test_join_of_runs_is_the_whole_chunks_fields(evs: list[Any], cuts: list[int], read: bool) -> None:
    """EventFields.join of consecutive runs' fields (what ingest reads a part at a time: Events.read with
    EventFields.read) equals the fields read from all the events at once, field by field and in every derived
    column, whether the runs computed their columns (read) or not (of)."""
    at = sorted({min(c, len(evs)) for c in cuts} | {0, len(evs)})
    runs = [(EventFields.read if read else EventFields.of)(evs[a:b]) for a, b in zip(at[:-1], at[1:])]
    joined, whole = EventFields.join(runs or [EventFields.of([])]), EventFields.of(evs)
    for key in ("ph", "ts", "dur", "pid", "tid", "cat", "name", "args"):
        a, b = getattr(joined, key), getattr(whole, key)
        assert len(a) == len(b) and all(x is y for x, y in zip(a, b))  # the same objects (a NaN is itself)
    assert joined.phase.tolist() == whole.phase.tolist()
    assert all(x is y for x, y in zip(joined.args_or_empty, whole.args_or_empty))
    rows = np.flatnonzero([type(e) is dict for e in evs])
    for key in ("ts", "dur"):
        a, b = joined.numbers(key), whole.numbers(key)
        assert (a is None) == (b is None) and (a is None or np.array_equal(a, b, equal_nan=True))
        a, b = joined.ns(key), whole.ns(key)
        assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist())
        assert joined.ns_at(key, rows).tolist() == whole.ns_at(key, rows).tolist()
    for key in ("pid", "tid"):
        assert joined.strings_at(key, rows, evs).tolist() == whole.strings_at(key, rows, evs).tolist()

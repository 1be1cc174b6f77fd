"""ingest.rules.Checker (vectorized, fed in chunks) against the per-event checker it replaced (kept here verbatim
as the reference): the same violations, index, rule and message, in the same order, for any events and any chunking
(issue 34: the per-event checker took 54 s of `scale` on a 1.1M-event trace, and its parse of the events 1.3 GB)."""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from habitat_trace.ingest import load
from habitat_trace.ingest.rules import UINT32_MAX, Checker, Violation, check_events, eps_us
from tests.conftest import DATA, EXTERNAL, TRACES, needs_shared


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _basic(i: int, e: dict, out: list[Violation]) -> bool:
    ph = e.get("ph")
    if ph == "M":
        return False
    if not _num(e.get("ts")):
        out.append(Violation(i, "ts", f"ts {e.get('ts')!r} is not a finite number"))
        return False
    if ph == "X":
        if not _num(e.get("dur")):
            out.append(Violation(i, "ts", f"dur {e.get('dur')!r} is not a finite number"))
            return False
        if e["dur"] < 0:
            out.append(Violation(i, "negative-dur", f"dur {e['dur']} < 0"))
            return False
    for key in ("pid", "tid"):
        v = e.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= UINT32_MAX:
            out.append(Violation(i, "id-range", f"{key} {v} does not fit uint32"))
    return True


def reference(events: list[Any]) -> list[Violation]:
    """The per-event checker of 96b909a (ingest/rules.py check_events, _nesting, _flows)."""
    out: list[Violation] = []
    slices: dict[tuple[str, str], list[tuple[float, float, int]]] = defaultdict(list)
    flows: list[tuple[int, dict]] = []
    for i, e in enumerate(events):
        if type(e) is not dict or not _basic(i, e, out):
            continue
        ph = e.get("ph")
        if ph == "X":
            slices[(str(e.get("pid")), str(e.get("tid")))].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), i))
        elif ph in ("s", "f"):
            flows.append((i, e))
    for track in slices.values():
        track.sort(key=lambda s: (s[0], -s[1], s[2]))
        stack: list[tuple[float, float, int]] = []
        for start, end, i in track:
            while stack and stack[-1][1] <= start + eps_us(start):
                stack.pop()
            if stack and end > stack[-1][1] + eps_us(end):
                top = stack[-1]
                out.append(Violation(i, "nesting", f"[{start}, {end}] starts inside event #{top[2]} "
                                     f"[{top[0]}, {top[1]}] on its track but ends after it"))
                continue
            stack.append((start, end, i))
    index = {}
    for key, track in slices.items():
        index[key] = (np.array([s[0] for s in track]), np.maximum.accumulate(np.array([s[1] for s in track])))
    for i, e in flows:
        starts, reach = index.get((str(e.get("pid")), str(e.get("tid"))), (np.zeros(0), np.zeros(0)))
        ts = float(e["ts"])
        if e.get("ph") == "f" and e.get("bp") != "e":
            if not len(starts) or starts[-1] < ts - eps_us(ts):
                out.append(Violation(i, "flow-binding", f"flow end at {ts} has no slice at or after it"))
            continue
        pos = int(np.searchsorted(starts, ts + eps_us(ts), side="right")) - 1
        if pos < 0 or reach[pos] < ts - eps_us(ts):
            out.append(Violation(i, "flow-binding", f"flow {e.get('ph')} at {ts} is inside no slice on its track"))
    return sorted(out, key=lambda v: (v.index, v.rule))


def chunked(events: list[Any], cuts: list[int]) -> list[Violation]:
    checker = Checker()
    bounds = sorted({0, len(events), *(c % (len(events) + 1) for c in cuts)})
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        checker.feed(lo, events[lo:hi])
    return checker.violations()


EPOCH_US = 1.7e15  # epoch-stamped µs: past 2**53 ns a double no longer holds every ns (eps_us)
times = st.one_of(st.integers(-5, 40), st.floats(-5, 40), st.sampled_from([0.0005, 10.0004, EPOCH_US, EPOCH_US + 0.25]),
                  st.sampled_from([math.inf, math.nan, "3", None, True, [1]]))
ids = st.one_of(st.integers(0, 3), st.sampled_from([-1, 2**32, 2**40, "a", "1", 1.0, True, None, [2]]))
event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "s", "f", "M", "i", "B", None, ["X"]])},
    optional={"ts": times, "dur": times, "pid": ids, "tid": ids, "bp": st.sampled_from(["e", "s", None])})
entry = st.one_of(event, event, event, st.sampled_from([1, "x", None, [1, 2]]))


@given(st.lists(entry, max_size=40), st.lists(st.integers(0, 40), max_size=4))
@example([{"ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1}, {"ph": "X", "ts": 5, "dur": 10, "pid": 1, "tid": 1},
          {"ph": "X", "ts": 5, "dur": 10, "pid": 1.0, "tid": 1}, {"ph": "f", "ts": 4, "pid": 1, "tid": 1, "bp": "e"},
          {"ph": "f", "ts": 30, "pid": "1", "tid": 1}], [2])
def test_same_violations_as_the_per_event_checker(events: list[Any], cuts: list[int]) -> None:
    want = reference(events)
    assert chunked(events, cuts) == want
    assert check_events(events) == want


@needs_shared
@pytest.mark.parametrize("path", sorted(TRACES.glob("*/*.pt.trace.json.gz")) + sorted(EXTERNAL.glob("*.json.gz"))
                         + [DATA / "a100_nccl_step5.json.gz"], ids=lambda p: p.name.split(".")[0])
def test_ingest_records_the_same_violations_on_real_traces(path: Path) -> None:
    tables = load(path, require_gpu=False)
    assert tables.violations == tuple(reference(list(tables.events)))

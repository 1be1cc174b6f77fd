"""The rules Perfetto's JSON importer applies, as a checker: ``check_events(events) -> [Violation]``.

Perfetto (trace processor and UI) does not support overlapping B/E/X events on one track: slices must
nest, as the JSON spec says (perfetto.dev/docs/faq, "overlapping events in JSON traces"); an X slice
that starts inside another and ends after it is not displayed as recorded (it is dropped or cut and
counted in the trace's import stats). Rules checked, per event index:
- ``ts``: ts (and dur) are finite numbers; ``negative-dur``: dur >= 0;
- ``id-range``: numeric pid/tid fit uint32 (Perfetto keeps pids/tids as unsigned 32-bit);
- ``nesting``: X slices nest on each (pid, tid) track (equal boundaries allowed);
- ``flow-binding``: a flow ``s`` (and an ``f`` with ``bp: "e"``) lies inside a slice on its track; an
  ``f`` without ``bp`` needs a slice starting at or after it on its track.
Real Kineto traces already break some rules (Hopper PDL kernels overlap on a stream track; cuda_sync
records with tid -1, Kineto's "Command Buffer Full" with pid -1), so ``split`` reports the input's own violations
as warnings and only new ones as errors; a trace we write carries its input's (``by_rule``) in its header.
These are rules of the Chrome-trace JSON itself, so they sit with ingest: both the input and the output are
checked against them.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

UINT32_MAX = 2**32 - 1
EPS_US = 0.0005  # half a nanosecond: µs values are written with 3 decimals


def eps_us(t: float) -> float:
    """Tolerance at time ``t`` (µs): half a ns, or the resolution a JSON reader's double has there.

    Beyond 2**53 ns (traces stamped in epoch µs, ~1.7e15) a double cannot hold every ns: ts and ts+dur
    each round to a quarter µs, so two ends that are equal in ns may read as crossing (the input has
    the same limit). Two ulps cover the rounding of ts, dur and their sum."""
    return max(EPS_US, 2 * math.ulp(abs(t)))


@dataclass(frozen=True)
class Violation:
    index: int  # into traceEvents
    rule: str
    message: str

    def __str__(self) -> str:
        return f"event #{self.index}: {self.rule}: {self.message}"


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _track(e: dict) -> tuple[str, str]:
    return str(e.get("pid")), str(e.get("tid"))


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


def check_events(events: Iterable[Any]) -> list[Violation]:
    out: list[Violation] = []
    slices: dict[tuple[str, str], list[tuple[float, float, int]]] = defaultdict(list)
    flows: list[tuple[int, dict]] = []
    for i, e in enumerate(events):
        if type(e) is not dict or not _basic(i, e, out):
            continue
        ph = e.get("ph")
        if ph == "X":
            slices[_track(e)].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), i))
        elif ph in ("s", "f"):
            flows.append((i, e))
    for track in slices.values():
        _nesting(track, out)
    _flows(flows, slices, out)
    return sorted(out, key=lambda v: (v.index, v.rule))


def _nesting(track: list[tuple[float, float, int]], out: list[Violation]) -> None:
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


def _flows(flows: list[tuple[int, dict]], slices: dict, out: list[Violation]) -> None:
    index: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for key, track in slices.items():
        track.sort(key=lambda s: (s[0], -s[1], s[2]))
        starts = np.array([s[0] for s in track])
        reach = np.maximum.accumulate(np.array([s[1] for s in track]))
        index[key] = (starts, reach)
    for i, e in flows:
        starts, reach = index.get(_track(e), (np.zeros(0), np.zeros(0)))
        ts = float(e["ts"])
        if e.get("ph") == "f" and e.get("bp") != "e":
            if not len(starts) or starts[-1] < ts - eps_us(ts):
                out.append(Violation(i, "flow-binding", f"flow end at {ts} has no slice at or after it"))
            continue
        pos = int(np.searchsorted(starts, ts + eps_us(ts), side="right")) - 1
        if pos < 0 or reach[pos] < ts - eps_us(ts):
            out.append(Violation(i, "flow-binding", f"flow {e.get('ph')} at {ts} is inside no slice on its track"))


def by_rule(violations: Iterable[Violation]) -> dict[str, list[int]]:
    """Violations as {rule: [event index, ...]}: what a written trace's ``habitat_trace.input_violations`` holds of
    its input's, so that ``check`` tells them from ours without the input at hand."""
    out: dict[str, set[int]] = {}
    for v in violations:
        out.setdefault(v.rule, set()).add(v.index)
    return {rule: sorted(indices) for rule, indices in out.items()}


def split(violations: Iterable[Violation], known: Mapping[str, Iterable[int]]) -> tuple[list[Violation],
                                                                                        list[Violation]]:
    """(errors, warnings): the ``violations`` of an output its input did not have, and those it had (``known``:
    by_rule of the input's). Events keep their index in our outputs, so a violation is "the same" when index
    and rule match."""
    had = {(int(i), rule) for rule, indices in known.items() for i in indices}
    errors: list[Violation] = []
    warnings: list[Violation] = []
    for v in violations:
        (warnings if (v.index, v.rule) in had else errors).append(v)
    return errors, warnings

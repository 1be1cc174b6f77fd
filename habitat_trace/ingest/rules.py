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
import operator
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.ingest import fields as F
from habitat_trace.ingest.events import event_chunks
from habitat_trace.ingest.fields import EventFields, take
from habitat_trace.ingest.linking import previous_open

UINT32_MAX = 2**32 - 1
# what the rules do with an event, by its ph: skip it (metadata, not an object), check its times (any other ph), and
# place it on its track (slices, flows)
_SKIP, _OTHER, _SLICE, _FLOW_S, _FLOW_F = range(5)
_KIND_OF_PHASE = np.full(max(F.PHASES.values()) + 1, _OTHER, dtype=np.int8)  # by EventFields.phase code
_KIND_OF_PHASE[[F.M, F.NOT_OBJECT_PH, F.X, F.FLOW_S, F.FLOW_F]] = _SKIP, _SKIP, _SLICE, _FLOW_S, _FLOW_F
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
    try:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    except OverflowError:  # an int past a double's range (only the json module's parse reads one)
        return False


def _numbers(values: Sequence[Any], arr: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(each value as a float64, whether it is a finite number: an int or float, not a bool), as ``_num`` and
    ``float`` read them one by one; ``arr``: EventFields.numbers, the values as float64 when every value is an
    int, a float or None (a Kineto trace's times; None: NaN, never finite, as _num says)."""
    if arr is not None:
        return arr, np.isfinite(arr)
    ok = np.array([_num(v) for v in values], dtype=bool)
    return np.array([float(v) if k else np.nan for v, k in zip(values, ok)], dtype=np.float64), ok


def _bad_id(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= UINT32_MAX


def _bad_ids(values: Sequence[Any]) -> np.ndarray:
    """Per value, an int id outside uint32; judged once per distinct value (pids and tids repeat)."""
    try:
        bad = {v for v in set(values) if _bad_id(v)}
    except TypeError:  # an unhashable id (a list)
        return np.array([_bad_id(v) for v in values], dtype=bool)
    return np.array([_bad_id(v) for v in values], dtype=bool) if bad else np.zeros(len(values), dtype=bool)


class Checker:
    """``check_events`` in chunks: ``feed(first, events)`` for consecutive chunks (ingest feeds the chunks it
    parses, so the rules cost no parse of their own), then ``violations()``. Per chunk the per-event rules are
    vectorized and only the X slices and flows are kept (track code, times, index: ~30 bytes an event); the
    tracks' nesting and the flows' binding are judged at the end, when every track is whole."""

    def __init__(self) -> None:
        self._out: list[Violation] = []
        self._tracks: dict[tuple[str, str], int] = {}  # (str(pid), str(tid)) -> track code
        self._slices: list[tuple[np.ndarray, ...]] = []  # per chunk: track, start, end, index
        self._flows: list[tuple[np.ndarray, ...]] = []  # per chunk: track, ts, index, is_f, loose (f without bp "e")

    def feed(self, first: int, events: Sequence[Any], fields: Optional[EventFields] = None) -> None:
        """Events ``first`` .. ``first + len(events) - 1`` (``fields``: their EventFields, when already read)."""
        f = fields if fields is not None else EventFields.of(events)
        kind = _KIND_OF_PHASE[f.phase]
        ts, ok = _numbers(f.ts, f.numbers("ts"))
        checked = kind != _SKIP
        for k in np.flatnonzero(checked & ~ok).tolist():
            self._out.append(Violation(first + k, "ts", f"ts {f.ts[k]!r} is not a finite number"))
        ok &= checked
        xs = ok & (kind == _SLICE)
        dur, ok_dur = _numbers(f.dur, f.numbers("dur"))
        negative = xs & ok_dur & (dur < 0)
        for k in np.flatnonzero(xs & (~ok_dur | negative)).tolist():
            d = f.dur[k]
            self._out.append(Violation(first + k, "ts", f"dur {d!r} is not a finite number") if not ok_dur[k] else
                             Violation(first + k, "negative-dur", f"dur {d} < 0"))
        ok &= ~xs | (ok_dur & ~negative)  # _basic's False: no other rule is checked
        for key, values in (("pid", f.pid), ("tid", f.tid)):
            for k in np.flatnonzero(ok & _bad_ids(values)).tolist():
                self._out.append(Violation(first + k, "id-range", f"{key} {values[k]} does not fit uint32"))
        placed = np.flatnonzero(ok & (kind >= _SLICE))
        track = self._track_codes(f, placed)
        sl = kind[placed] == _SLICE
        rows = placed[sl]
        self._slices.append((track[sl], ts[rows], ts[rows] + dur[rows], rows + first))
        rows = placed[~sl]
        is_f = kind[rows] == _FLOW_F
        loose = is_f.copy()  # an f bound to its enclosing slice (bp "e") is not loose
        bp = map(dict.get, take(events, rows[is_f].tolist()), repeat("bp"))
        loose[is_f] = np.fromiter(map(operator.ne, bp, repeat("e")), dtype=bool, count=int(is_f.sum()))
        self._flows.append((track[~sl], ts[rows], rows + first, is_f, loose))

    def extend(self, later: "Checker") -> None:
        """Take ``later``'s chunks (fed the events right after this one's last) as if fed here: its track codes,
        numbered by first appearance in its own chunks, are renumbered into this one's in that order, which is the
        numbering feeding them here would have given."""
        keys = sorted(later._tracks, key=later._tracks.__getitem__)
        remap = np.array([self._tracks.setdefault(k, len(self._tracks)) for k in keys], dtype=np.int64)
        self._out += later._out
        self._slices += [(remap[track], *rest) for track, *rest in later._slices]
        self._flows += [(remap[track], *rest) for track, *rest in later._flows]

    def _track_codes(self, f: EventFields, rows: np.ndarray) -> np.ndarray:
        """The code of each row's track (str(pid), str(tid)). Where the chunk's pid and tid strings are at hand
        (EventFields.id_strings: no null among them), the pairs are factorized (pandas' hash table; a Kineto
        trace has a few dozen tracks) and only the distinct ones are looked up; else each distinct (pid, tid) is
        stringified once where equal values have equal strings (ints, strings and null; 1 == 1.0 == True would not)."""
        pid, tid = f.id_strings("pid"), f.id_strings("tid")
        if pid is not None and tid is not None:
            p_code, p_uniq = pd.factorize(pid[rows], sort=False)
            t_code, t_uniq = pd.factorize(tid[rows], sort=False)
            width = max(len(t_uniq), 1)
            code, pairs = pd.factorize(p_code.astype(np.int64) * width + t_code, sort=False)
            glob = [self._tracks.setdefault((p_uniq[k // width], t_uniq[k % width]), len(self._tracks))
                    for k in pairs.tolist()]
            return np.array(glob, dtype=np.int64)[code]
        pids, tids = take(f.pid, rows.tolist()), take(f.tid, rows.tolist())
        if set(map(type, pids)) | set(map(type, tids)) <= {int, str, type(None)}:
            pairs = list(zip(pids, tids))
            local = {k: i for i, k in enumerate(dict.fromkeys(pairs))}
            glob = [self._tracks.setdefault((str(p), str(t)), len(self._tracks)) for p, t in local]
            return np.array(glob, dtype=np.int64)[np.fromiter(map(local.__getitem__, pairs), dtype=np.int64,
                                                              count=len(pairs))]
        return np.array([self._tracks.setdefault((str(p), str(t)), len(self._tracks)) for p, t in zip(pids, tids)],
                        dtype=np.int64)

    def violations(self) -> list[Violation]:
        """Every violation of the events fed, sorted by (index, rule)."""
        out = list(self._out)
        track, start, end, index = (np.concatenate(c) for c in zip(*self._slices)) if self._slices else \
            (np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))
        order = np.lexsort((index, -end, start, track))  # per track by (start, -end, index), as _nesting sorts
        track, start, end, index = track[order], start[order], end[order], index[order]
        cut = np.flatnonzero(np.diff(track)) + 1
        lo, hi = np.concatenate(([0], cut)), np.concatenate((cut, [len(track)]))
        eps_start = np.maximum(EPS_US, 2 * np.spacing(np.abs(start)))
        # a track whose slices in this order each end by the next one's start never holds two on the stack
        apart = np.ones(len(track), dtype=bool)
        apart[1:] = (end[:-1] <= start[1:] + eps_start[1:]) | (track[1:] != track[:-1])
        eps_end = np.maximum(EPS_US, 2 * np.spacing(np.abs(end)))
        stacked = [(a, b) for a, b in zip(lo.tolist(), hi.tolist()) if not apart[a:b].all()]
        for a, b in _maybe_crossing(stacked, start, end, eps_start, eps_end):
            _nesting(start[a:b].tolist(), end[a:b].tolist(), eps_start[a:b].tolist(), eps_end[a:b].tolist(),
                     index[a:b].tolist(), out)
        spans = dict(zip(track[lo].tolist(), zip(lo.tolist(), hi.tolist()))) if len(track) else {}
        if self._flows:
            f_track, f_ts, f_index, f_is_f, f_loose = (np.concatenate(c) for c in zip(*self._flows))
            _flows(f_track, f_ts, f_index, f_is_f, f_loose, spans, start, end, out)
        return sorted(out, key=lambda v: (v.index, v.rule))


def check_events(events: Iterable[Any]) -> list[Violation]:
    checker = Checker()
    for first, chunk in event_chunks(events if isinstance(events, Sequence) else list(events)):
        checker.feed(first, chunk)
    return checker.violations()


def _nesting(start: list[float], end: list[float], eps_start: list[float], eps_end: list[float], index: list[int],
             out: list[Violation]) -> None:
    """One track's slices in (start, -end, index) order: a slice that starts inside the innermost open one and
    ends after it (beyond eps_us) does not nest."""
    stack: list[tuple[float, float, int]] = []
    for s, e, es, ee, i in zip(start, end, eps_start, eps_end, index):
        while stack and stack[-1][1] <= s + es:
            stack.pop()
        if stack and e > stack[-1][1] + ee:
            top = stack[-1]
            out.append(Violation(i, "nesting", f"[{s}, {e}] starts inside event #{top[2]} "
                                 f"[{top[0]}, {top[1]}] on its track but ends after it"))
            continue
        stack.append((s, e, i))


def _maybe_crossing(tracks: list[tuple[int, int]], start: np.ndarray, end: np.ndarray, eps_start: np.ndarray,
                    eps_end: np.ndarray) -> list[tuple[int, int]]:
    """The tracks (row spans of the sorted slices) on which ``_nesting`` may find a violation; the others nest.

    While no slice of a track has crossed, ``_nesting``'s stack top after popping at slice i is the latest earlier
    slice j with end[j] > start[i] + eps_start[i], provided those thresholds never decrease along the track (then a
    slice popped earlier ended by a threshold that is still below the current one; a slice below the top that ended
    within eps_end of its child stays, but the top is the same). linking.previous_open answers that for every slice
    at once, so slice i crosses under that assumption iff end[i] > end[j] + eps_end[i]; the first crossing of a track
    is the loop's first. A track with a candidate, or with a decreasing threshold, goes to the loop (the loop stops
    pushing a crossing slice, which the query does not model); a CPU thread's ~10^5 nested ops no longer do.
    """
    if not tracks:
        return []
    rows = np.concatenate([np.arange(a, b) for a, b in tracks])
    first = np.repeat(np.cumsum([0] + [b - a for a, b in tracks[:-1]]), [b - a for a, b in tracks])
    threshold = start[rows] + eps_start[rows]
    ends = end[rows]
    top = previous_open(threshold, ends, first)
    suspect = ((top != -1) & (ends > ends[np.maximum(top, 0)] + eps_end[rows])).astype(np.int8)
    suspect[1:] |= (threshold[1:] < threshold[:-1]) & (first[1:] == first[:-1])
    seen = np.concatenate(([0], np.cumsum(suspect)))
    at = np.cumsum([0] + [b - a for a, b in tracks])
    return [t for t, x, y in zip(tracks, at[:-1].tolist(), at[1:].tolist()) if seen[y] > seen[x]]


def _flows(track: np.ndarray, ts: np.ndarray, index: np.ndarray, is_f: np.ndarray, loose: np.ndarray,
           spans: dict[int, tuple[int, int]], start: np.ndarray, end: np.ndarray, out: list[Violation]) -> None:
    """A flow ``s`` (or an ``f`` bound to its enclosing slice) lies inside a slice of its track: the last slice
    starting at or before it reaches it (the running maximum of the ends); a loose ``f`` needs a slice starting at
    or after it. ``spans``: each track's rows of the sorted slices."""
    eps = np.maximum(EPS_US, 2 * np.spacing(np.abs(ts)))
    bad = np.zeros(len(ts), dtype=bool)
    for code in np.unique(track).tolist():
        mine = np.flatnonzero(track == code)
        a, b = spans.get(code, (0, 0))
        starts, t, e = start[a:b], ts[mine], eps[mine]
        if b == a:
            bad[mine] = True
            continue
        reach = np.maximum.accumulate(end[a:b])
        pos = np.searchsorted(starts, t + e, side="right") - 1
        inside = (pos >= 0) & (reach[np.maximum(pos, 0)] >= t - e)
        bad[mine] = np.where(loose[mine], starts[-1] < t - e, ~inside)
    for k in np.flatnonzero(bad).tolist():
        at = float(ts[k])
        kind = "f" if is_f[k] else "s"
        out.append(Violation(int(index[k]), "flow-binding", f"flow end at {at} has no slice at or after it"
                             if loose[k] else f"flow {kind} at {at} is inside no slice on its track"))


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

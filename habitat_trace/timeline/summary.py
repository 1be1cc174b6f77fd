"""``summarize(tables, dur_ns, clock) -> RankSummary``: one rank reduced to what the joint replay needs (its
collectives with their matching keys and sizes, and how their starts depend on each other's ends), so that the ranks
of a run need not be in one process (pipeline/fanout.py); the joint replay (timeline/joint.py) works on these alone.

joint._settle lays every rank out again and again (schedule.py) with its matched collectives held until the last
rank joined, and reads only their starts. Every time schedule's pass computes is the latest of other times plus
constants (max, +: a max-plus expression; Baccelli, Cohen, Olsder and Quadrat, *Synchronization and Linearity*,
1992, ch. 3), and only a collective's end differs between the layouts: it ends at max(start + D, F), its duration
D and floor F set by the other ranks. So with the rank's other durations and its host clock fixed, each collective's
start is max(c, X_1 + w_1, ..., X_k + w_k) over the ends X_i of the rank's earlier collectives. One symbolic pass,
schedule's pass with each time carried as such an expression (``Expr``), records them as a small DAG: a node per
collective (its start's expression; its value is its end) and an interned node wherever an expression would gather
more than MAX_TERMS terms (a term is dropped where another term's node is known to exceed it). Evaluating the DAG
(``RankSummary.layout``) for given D and F gives the starts schedule gives, to the ns (tests/test_summary.py, on
the real multi-rank fixtures at random durations and floors): its size grows with the collectives and the blocking
calls, not with the trace.

joint._settle's horizon also reads the first layout's earliest start and latest end over every GPU row: the latest
end is a node; the earliest start is the least constant start whenever no other row can start before it (its lower
bound: its value with every collective lasting 0 and no floor, as durations are >= 1 ns), else those rows are nodes.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import derived
from habitat_trace.timeline import links
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.schedule import NO_FLOOR, layout

MAX_TERMS = 6  # an expression with more terms becomes a node of its own (any bound is exact; this keeps nodes small)
NO_CONST = np.iinfo(np.int64).min  # a node without a constant term
_EMPTY: dict[int, int] = {}
FIELDS = ("row", "collective", "bytes", "pg", "seq")  # of collective_fields: what matching and the report read


class Expr:
    """off + max(c, max over terms (value of node v + w)); ``c`` None: no constant. ``t`` is shared between
    expressions and never changed; ``lb`` is a lower bound of the value (nodes at their lower bounds)."""

    __slots__ = ("c", "t", "off", "lb")

    def __init__(self, c: Optional[int], t: dict[int, int], off: int, lb: int) -> None:
        self.c, self.t, self.off, self.lb = c, t, off, lb

    def __add__(self, k: int) -> "Expr":
        return Expr(self.c, self.t, self.off + k, self.lb + k)

    def __sub__(self, k: int) -> "Expr":
        return self + (-k)


def const(v: int) -> Expr:
    return Expr(v, _EMPTY, 0, v)


class _Dag:
    """The nodes a symbolic pass creates, in creation (= evaluation) order."""

    def __init__(self) -> None:
        self.const: list[int] = []
        self.terms: list[tuple[tuple[int, int], ...]] = []
        self.coll: list[int] = []  # the collective whose end the node is, -1 for an interned expression
        self.lb: list[int] = []
        self._var: list[dict[int, int]] = []  # {node: 0}, one object per node (mx's shared-terms path)
        self._below: list[dict[int, int]] = []  # per node u: {v: w} with value(u) >= value(v) + w (its terms)

    def node(self, e: Expr, coll: int = -1) -> Expr:
        """A new node of value ``e`` (a collective's node: its end, whose lower bound is its start's), as an Expr."""
        k = len(self.const)
        self.const.append(NO_CONST if e.c is None else e.c + e.off)
        self.terms.append(tuple((v, w + e.off) for v, w in e.t.items()))
        self.coll.append(coll)
        self.lb.append(e.lb)
        self._var.append({k: 0})
        self._below.append({v: w + e.off for v, w in e.t.items()})  # a collective's end is >= its start: D >= 0
        return Expr(None, self._var[k], 0, e.lb)

    def mx(self, a: Expr, b: Expr) -> Expr:
        """max(a, b), without building a new expression where one bounds the other or both share their terms."""
        if not b.t:
            if a.lb >= b.c + b.off:  # type: ignore[operator]
                return a
            if not a.t:
                return b
        if not a.t and b.lb >= a.c + a.off:  # type: ignore[operator]
            return b
        cs = [x.c + x.off for x in (a, b) if x.c is not None]
        c = max(cs) if cs else None
        lb = max(a.lb, b.lb)
        if a.t is b.t:
            off = max(a.off, b.off)
            return self._norm(None if c is None else c - off, a.t, off, lb)
        t: dict[int, int] = {}
        for x in (a, b):
            for v, w in x.t.items():
                w += x.off
                if t.get(v, w - 1) < w:
                    t[v] = w
        for u, tu in list(t.items()):  # a term another term's node is known to exceed adds nothing
            for v, w in self._below[u].items():
                tv = t.get(v)
                if tv is not None and tv <= w + tu:
                    del t[v]
        return self._norm(c, t, 0, lb)

    def _norm(self, c: Optional[int], t: dict[int, int], off: int, lb: int) -> Expr:
        """Drop a constant the terms' lower bounds already exceed; intern past MAX_TERMS terms."""
        if c is not None and max(self.lb[v] + w for v, w in t.items()) >= c:
            c = None
        e = Expr(c, t, off, lb)
        return self.node(e) if len(t) > MAX_TERMS else e


def collectives(tables: Any) -> pd.DataFrame:
    """Per NCCL kernel (scale.collective.collective_fields' FIELDS: row, collective, size, process group, Seq) and the
    time that orders it on its rank (``start``): its launch (the host's order, which NCCL's same-order rule is
    about), or its GPU start where no launch was seen."""
    from habitat_trace.scale.collective import collective_fields

    f = collective_fields(tables)[list(FIELDS)]
    rows = f["row"].to_numpy()
    launch, gpu_start = tables.gpu[S.LAUNCH_TS].to_numpy()[rows], tables.gpu[S.TS].to_numpy()[rows]
    return f.assign(start=np.where(launch >= 0, launch, gpu_start))


@dataclass(frozen=True)
class Layout:
    """One evaluation: each collective's start, and the layout's earliest start and latest end over every GPU row
    (valid for a layout without floors, the first of joint._settle; None for a rank without GPU rows)."""

    starts: np.ndarray
    first: Optional[int]
    last: Optional[int]


@dataclass(frozen=True)
class RankSummary:
    """A rank for the joint replay (module doc): its collectives (``collectives``: one row per NCCL kernel) with
    their predicted durations, and the DAG of their starts, as arrays (pickled small)."""

    fields: pd.DataFrame  # collectives(tables)
    dur_ns: np.ndarray  # per collective: its predicted duration
    node_const: np.ndarray  # per node: constant term (NO_CONST: none)
    term_ptr: np.ndarray  # per node: its terms are term_node/term_w[term_ptr[k]:term_ptr[k + 1]]
    term_node: np.ndarray
    term_w: np.ndarray
    node_coll: np.ndarray  # per node: the collective whose end it is, -1 otherwise
    first_const: Optional[int]  # the least start of the rows without terms (None: no GPU rows)
    first_nodes: np.ndarray  # nodes of the rows that could start before it
    last_node: int  # the latest end over every row (-1: no GPU rows)

    @property
    def rows(self) -> np.ndarray:
        return self.fields["row"].to_numpy()

    @property
    def nbytes(self) -> int:
        arrays = (self.dur_ns, self.node_const, self.term_ptr, self.term_node, self.term_w, self.node_coll)
        return int(sum(a.nbytes for a in arrays) + self.fields.memory_usage(deep=True).sum())

    def layout(self, dur_ns: np.ndarray, floor_ns: np.ndarray) -> Layout:
        """The starts schedule gives each collective when it lasts ``dur_ns`` and cannot end before ``floor_ns``
        (NO_FLOOR: no floor), the rank's other durations and clock as summarized."""
        const, ptr = self.node_const.tolist(), self.term_ptr.tolist()
        node, w, coll = self.term_node.tolist(), self.term_w.tolist(), self.node_coll.tolist()
        dur, floor = np.asarray(dur_ns, dtype=np.int64).tolist(), np.asarray(floor_ns, dtype=np.int64).tolist()
        value: list[int] = [0] * len(const)
        starts = [0] * len(dur)
        for k in range(len(const)):
            v = const[k]
            for j in range(ptr[k], ptr[k + 1]):
                x = value[node[j]] + w[j]
                if x > v:
                    v = x
            i = coll[k]
            if i >= 0:
                starts[i] = v
                v += dur[i]
                if floor[i] > v:
                    v = floor[i]
            value[k] = v
        last = value[self.last_node] if self.last_node >= 0 else None
        first = self.first_const
        for k in self.first_nodes.tolist():
            first = value[k] if first is None else min(first, value[k])
        return Layout(np.array(starts, dtype=np.int64), first, last)


def summarize(tables: Any, dur_ns: np.ndarray, clock: Optional[CpuClock] = None,
              prepared: Optional["Prepared"] = None) -> RankSummary:
    """The rank's summary for the joint replay (module doc): ``dur_ns`` its predicted GPU durations, ``clock`` its
    host clock (None: the recorded CPU times); ``prepared``: ``prepare(tables)``, shared by a rank's summaries."""
    prep = prepared if prepared is not None else prepare(tables)
    dur = np.asarray(dur_ns, dtype=np.int64)
    p = _SymbolicPass(prep, dur, clock or CpuClock.identity())
    d = p.dag
    ptr = np.zeros(len(d.terms) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(t) for t in d.terms])
    flat = [x for t in d.terms for x in t]
    low = [k for k, lb in p.low if p.first_const is None or lb < p.first_const]
    rows = prep.fields["row"].to_numpy()
    return RankSummary(prep.fields, dur[rows], np.array(d.const, dtype=np.int64), ptr,
                       np.array([v for v, _ in flat], dtype=np.int64), np.array([w for _, w in flat], dtype=np.int64),
                       np.array(d.coll, dtype=np.int64), p.first_const, np.array(low, dtype=np.int64), p.last_node)


@dataclass(frozen=True)
class Prepared:
    """What schedule's pass reads of a trace that no duration or clock changes (its Layout, as lists), and the
    trace's collectives."""

    fields: pd.DataFrame
    order: np.ndarray
    waits: list[links.SyncWait]
    deps: dict[int, list[int]]
    code: list[int]
    ts: list[int]
    end: list[int]
    launch: list[int]
    lat: list[int]
    gap: list[int]
    dep_gap: list[int]
    call_ts0: list[int]
    call_end0: list[int]
    call_ts_ns: np.ndarray
    call_end_ns: np.ndarray
    by_end: list[int]


def prepare(trace: Any) -> Prepared:
    """The trace's Prepared: schedule's Layout (built once per trace, Tables.derived) as the lists the symbolic pass
    reads, and the trace's collectives."""
    lay = derived(trace, layout)
    calls = trace.calls
    return Prepared(collectives(trace).reset_index(drop=True), lay.order, lay.waits, lay.deps, lay.code.tolist(),
                    lay.ts.tolist(), lay.end.tolist(), lay.launch.tolist(), lay.lat.tolist(), lay.gap.tolist(),
                    lay.dep_gap.tolist(), calls[S.TS].tolist(), calls[S.END].tolist(), lay.call_ts_ns,
                    lay.call_end_ns, lay.by_end.tolist())


class _SymbolicPass:
    """schedule._run and schedule._Pass over Exprs (module doc): the same order and the same rules, each max a
    ``_Dag.mx``. The collectives end at their node."""

    def __init__(self, prep: Prepared, dur: np.ndarray, clock: CpuClock) -> None:
        self.dag = _Dag()
        self.ts, self.end, self.launch, self.lat, self.gap = prep.ts, prep.end, prep.launch, prep.lat, prep.gap
        self.dep_gap, self.deps, self.code, self.dur = prep.dep_gap, prep.deps, prep.code, dur.tolist()
        rows = prep.fields["row"].tolist()
        self.held = dict(zip(rows, range(len(rows))))
        self.call_ts0, self.call_end0 = prep.call_ts0, prep.call_end0
        if clock.is_identity:
            self.call_ts, self.call_end = self.call_ts0, self.call_end0
        else:
            self.call_ts, self.call_end = clock(prep.call_ts_ns).tolist(), clock(prep.call_end_ns).tolist()
        self.by_end = prep.by_end
        self.done_i = 0
        self.start: list[Optional[Expr]] = [None] * len(self.ts)
        self.new_end: list[Expr] = [const(0)] * len(self.ts)
        self.last_start: dict[int, Expr] = {}
        self.last_end: dict[int, Expr] = {}
        self.done_new: dict[int, Expr] = {}
        self.done_old: dict[int, int] = {}
        self.b_te: list[int] = []
        self.b_shift: list[Expr] = []
        self.first_const: Optional[int] = None
        self.low: list[tuple[int, int]] = []  # (node, lower bound) of rows with terms that may start first
        self._run(prep.order, prep.waits)

    def _run(self, order: np.ndarray, waits: Sequence[links.SyncWait]) -> None:
        """schedule's pass (``waits``: the blocking calls in origin end order, as the Layout keeps them)."""
        w_i = 0
        for r in order.tolist():
            while w_i < len(waits) and self.call_end0[waits[w_i].call] < self.ts[r]:
                self.wait(waits[w_i])
                w_i += 1
            self.place(r)
        for w in waits[w_i:]:
            self.wait(w)
        # the latest end over every row: each stream's (durations >= 0, so a first row's end is not below its start)
        ends = list(self.last_end.values())
        last = ends[0] if ends else None
        for e in ends[1:]:
            last = self.dag.mx(last, e)  # type: ignore[arg-type]
        self.last_node = -1 if last is None else len(self.dag.const)
        if last is not None:
            self.dag.node(last)

    def place(self, r: int) -> None:
        """schedule._Pass.place."""
        d, c, call = self.dag, self.code[r], self.launch[r]
        if c in self.last_end:
            lo = d.mx(self.last_start[c], self.last_end[c] + self.gap[r])
        else:
            lo = const(self.ts[r] if call < 0 else -(1 << 62))
        if call >= 0:
            le = self.call_end[call]
            k = bisect_right(self.b_te, le)
            lo = d.mx(lo, (self.b_shift[k - 1] + (le + self.lat[r])) if k else const(le + self.lat[r]))
        for a in self.deps.get(r, ()):
            if self.start[a] is not None:
                lo = d.mx(lo, self.new_end[a] + self.dep_gap[r])
        self._first(lo)
        i = self.held.get(r)
        end = d.node(lo, i) if i is not None else lo + self.dur[r]
        self.start[r], self.new_end[r] = lo, end
        self.last_start[c] = lo
        self.last_end[c] = d.mx(self.last_end.get(c, lo), end)

    def _first(self, lo: Expr) -> None:
        if not lo.t:
            v = lo.c + lo.off  # type: ignore[operator]
            self.first_const = v if self.first_const is None else min(self.first_const, v)
        elif self.first_const is None or lo.lb < self.first_const:
            self.low.append((len(self.dag.const), lo.lb))
            self.dag.node(lo)

    def _advance(self, t: int) -> None:
        d = self.dag
        while self.done_i < len(self.by_end) and self.end[self.by_end[self.done_i]] <= t:
            r = self.by_end[self.done_i]
            c = self.code[r]
            self.done_new[c] = d.mx(self.done_new.get(c, self.new_end[r]), self.new_end[r])
            self.done_old[c] = max(self.done_old.get(c, self.end[r]), self.end[r])
            self.done_i += 1

    def _awaited(self, w: links.SyncWait) -> Optional[tuple[Expr, int]]:
        if w.row >= 0 and self.start[w.row] is not None:
            return self.new_end[w.row], self.end[w.row]
        if w.stream == links.ALL and self.done_new:
            ends = list(self.done_new.values())
            out = ends[0]
            for e in ends[1:]:
                out = self.dag.mx(out, e)
            return out, max(self.done_old.values())
        if w.stream in self.done_new:
            return self.done_new[w.stream], self.done_old[w.stream]
        return None

    def wait(self, w: links.SyncWait) -> None:
        """schedule._Pass.wait: only the shift it leaves matters to the GPU rows after it."""
        d = self.dag
        ts, te = self.call_ts[w.call], self.call_end[w.call]
        ts0, te0 = self.call_ts0[w.call], self.call_end0[w.call]
        self._advance(te0)
        ws = max(ts, self.b_te[-1]) if self.b_te else ts
        shift = self.b_shift[-1] if self.b_shift else const(0)
        new_start = shift + ts
        end = new_start + (te - ts)
        awaited = self._awaited(w)
        if awaited is not None:
            aw_new, aw_old = awaited
            wait_old = min(max(aw_old - ts0, 0), te0 - ts0)
            end = d.mx(new_start + max((te - ts) - wait_old, 0), aw_new + (te0 - max(ts0, aw_old)))
        end = d.mx(end, shift + ws)
        self.b_te.append(te)
        self.b_shift.append(end - te)


def layouts(summaries: Sequence[RankSummary], durs: Sequence[np.ndarray],
            floors: Sequence[np.ndarray]) -> list[Layout]:
    return [s.layout(d, f) for s, d, f in zip(summaries, durs, floors)]


def no_floors(summary: RankSummary) -> np.ndarray:
    return np.full(len(summary.dur_ns), NO_FLOOR, dtype=np.int64)

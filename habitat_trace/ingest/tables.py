"""Turn the raw ``traceEvents`` list into typed pandas tables (GPU events, ops, calls, flows, ...).

A chunk's fields are read once (fields.EventFields) and its event indices bucketed by category (``Chunk``);
each table is then built column by column from those, taking its rows' values. Nothing here links tables
together: that is ``linking``'s job.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any, Sequence

import numpy as np
import orjson
import pandas as pd

from habitat_trace.ingest import columns as col
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.fields import (FLOW_F, FLOW_S, FLOW_T, INSTANT, INSTANT_UPPER, M, NO_CAT, X, EventFields,
                                         arg, arg_or, take)

CAT_INSTANT = "cpu_instant_event"
NO_TIME = col.NO_TIME  # one sentinel for every int64 ns column (columns.py)
_NO_ROWS = np.zeros(0, dtype=np.int64)
_CUT = orjson.Fragment(b"\x00")  # ends a row's JSON in _shared's one dump


@dataclass(frozen=True)
class Chunk:
    """One chunk of events as the table builders read it: the events, their fields (read once), the sorted event
    indices per normalized category (``bucket_events``) and each event's normalized category (None where it has
    none: not bucketed under one)."""

    events: Sequence[Any]
    fields: EventFields
    buckets: dict[str, np.ndarray]
    category: np.ndarray

    @classmethod
    def of(cls, events: Sequence[Any], fields: EventFields | None = None) -> "Chunk":
        f = fields if fields is not None else EventFields.of(events)
        return cls(events, f, *_buckets(events, f.cat))

    def rows(self, cats: Sequence[str]) -> np.ndarray:
        """Sorted indices of the events of any of ``cats``."""
        parts = [self.buckets[c] for c in cats if c in self.buckets]
        if len(parts) == 1:
            return parts[0]
        return np.sort(np.concatenate(parts)) if parts else _NO_ROWS


def bucket_events(events: Sequence[Any]) -> dict[str, list[int]]:
    """Indices of events per normalized category; ``"[memory]"`` collects memory instants."""
    return {cat: rows.tolist() for cat, rows in _buckets(events, EventFields.of(events).cat)[0].items()}


def _buckets(events: Sequence[Any], cats: Sequence[Any]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Sorted int64 indices of events per normalized category, and each event's normalized category.

    The grouping is vectorized on factorized codes of the categories (EventFields.cat).
    """
    try:
        codes, uniq = pd.factorize(pd.Series(cats, dtype=object), sort=False, use_na_sentinel=False)
    except TypeError:  # an unhashable category (a list): such events are never bucketed
        cats = [c if c is None or c is NO_CAT or isinstance(c, str) else 1.5 for c in cats]
        codes, uniq = pd.factorize(pd.Series(cats, dtype=object), sort=False, use_na_sentinel=False)
    order = np.argsort(codes, kind="stable").astype(np.int64)  # stable: indices stay ascending within a category
    bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    parts: dict[str, list[np.ndarray]] = defaultdict(list)
    norm = np.full(len(uniq), None, dtype=object)
    for k, cat in enumerate(uniq):
        rows = order[bounds[k]:bounds[k + 1]]
        if cat is NO_CAT or (not isinstance(cat, str) and pd.isna(cat)):  # factorize turns None into nan
            mem = [i for i in rows.tolist() if events[i].get("name") == "[memory]"]
            if mem:
                parts["[memory]"].append(np.array(mem, dtype=np.int64))
        elif isinstance(cat, str):
            norm[k] = S.CATEGORY_ALIASES.get(cat, cat)
            parts[norm[k]].append(rows)
            if cat == CAT_INSTANT:  # torch >= 1.13 writes [memory] instants with this category
                parts["[memory]"].append(np.array([i for i in rows.tolist() if events[i].get("name") == "[memory]"],
                                                  dtype=np.int64))
    buckets = {cat: rows[0] if len(rows) == 1 else np.sort(np.concatenate(rows)) for cat, rows in parts.items()}
    return buckets, norm[codes] if len(uniq) else np.zeros(0, dtype=object)


def _base(c: Chunk, idx: np.ndarray) -> tuple[np.ndarray, list[dict], list[str], dict[str, Any]]:
    """Common columns of the X (duration) events among ``idx``, their args dicts and their names."""
    f = c.fields
    idx = idx[f.phase[idx] == X]
    name, names = f.names_at(idx)
    cols: dict[str, Any] = {
        S.EVENT: idx,
        S.NAME: name,
        S.PID: f.strings_at("pid", idx, c.events),
        S.TID: f.strings_at("tid", idx, c.events),
        S.TS: f.ns_at("ts", idx),
        S.DUR: f.ns_at("dur", idx),
    }
    return idx, take(f.args_or_empty, idx.tolist()), names, cols


def _shared(rows: list[tuple]) -> list[tuple]:
    """Equal rows as one object. An op's Input Dims, Input type and Concrete Inputs repeat every step,
    and a parsed trace holds new lists and strings for each op (1.2x the file of a 50-step GPT-2 trace).
    Rows are equal when their JSON is; JSON writes both None and NaN as null, so a row whose JSON has a
    null joins another only when they also compare equal (NaN never does). A row orjson cannot write
    (an int past 64 bits, possible only from the json-module fallback) leaves the rows unshared.
    The rows are grouped by their JSON (factorized, no Python loop); only a row whose JSON has a null and that is not
    the first of its group is compared with that first one. The JSON of every row comes from one ``orjson.dumps``
    (a call per row took 0.8 s of issue 34's trace), cut at a NUL after each row: a byte orjson never writes (it
    escapes one in a string), so each piece is one row's JSON between two commas."""
    between: list[Any] = [_CUT] * (2 * len(rows) + 1)
    between[1::2] = rows
    try:
        blob = orjson.dumps(between)  # [\0,ROW0,\0,ROW1,\0,...,\0]
    except orjson.JSONEncodeError:
        return rows
    keys = np.array(blob.split(b"\x00")[1:-1], dtype=object)  # ",ROW," for each row
    codes, uniq = pd.factorize(keys, sort=False)  # codes number the groups in the order they first appear
    n = np.arange(len(rows))
    new = np.ones(len(rows), dtype=bool)
    new[1:] = codes[1:] > np.maximum.accumulate(codes)[:-1]
    source = np.flatnonzero(new)[codes]  # each row's group's first row
    nulls = np.fromiter((b"null" in k for k in uniq), dtype=bool, count=len(uniq))
    out = list(itemgetter(*source.tolist())(rows)) if len(rows) > 1 else list(rows)
    check = np.flatnonzero(nulls[codes] & (source != n)).tolist()
    same = np.equal(_objects(take(out, check)), _objects(take(rows, check)))  # tuple ==, one C loop
    for i in np.asarray(check, dtype=np.int64)[~same.astype(bool)].tolist():  # NaN never equals itself
        out[i] = rows[i]  # the row keeps its own object
    return out


def _objects(values: list[Any]) -> np.ndarray:
    """A 1-d object array of ``values`` (np.array would make rows of tuples a 2-d array)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _columns(rows: list[tuple], n: int) -> list[list[Any]]:
    """Transpose per-event tuples into ``n`` column lists."""
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


def _triples(cols: dict[str, Any], grid: list[Any], block: list[Any]) -> None:
    grid3, block3 = col.triples(grid), col.triples(block)
    cols[S.GRID_X], cols[S.GRID_Y], cols[S.GRID_Z] = grid3[:, 0], grid3[:, 1], grid3[:, 2]
    cols[S.BLOCK_X], cols[S.BLOCK_Y], cols[S.BLOCK_Z] = block3[:, 0], block3[:, 1], block3[:, 2]


def gpu_table(c: Chunk) -> pd.DataFrame:
    idx, args, _, cols = _base(c, c.rows(S.GPU_CATEGORIES))
    cols[S.CAT] = col.text(c.category[idx])
    cols[S.DEVICE] = col.ints(arg(args, "device"), default=0)
    cols[S.STREAM] = col.ints(arg(args, "stream"))
    cols[S.CORRELATION] = col.ints(arg(args, "correlation"))
    cols[S.EXTERNAL_ID] = col.ints(arg_or(args, "External id", "external id"))
    _triples(cols, arg(args, "grid"), arg(args, "block"))
    cols[S.REGISTERS] = col.ints(arg(args, "registers per thread"), default=0)
    cols[S.SHARED_MEM] = col.ints(arg(args, "shared memory"), default=0)
    cols[S.BYTES] = col.ints(arg(args, "bytes"), default=0)
    cols[S.CUPTI_BLOCKS_PER_SM] = col.floats(arg(args, "blocks per SM"))
    cols[S.CUPTI_WARPS_PER_SM] = col.floats(arg(args, "warps per SM"))
    cols[S.CUPTI_OCCUPANCY] = col.floats(arg(args, "est. achieved occupancy %"))
    df = pd.DataFrame(cols)
    df[S.STREAM] = _stream_of_track(df[S.TID], df[S.STREAM].to_numpy())
    return df


def _stream_of_track(tid: pd.Series, stream: np.ndarray) -> np.ndarray:
    """Kineto draws a GPU event on the track tid = its stream; where a numeric tid and the "stream" arg disagree
    (a hand-edited or fuzzed trace; none of the 128 shared, collected and public traces does) the track wins, so
    the replay's queues are the tracks viewers check for overlaps."""
    codes, uniq = pd.factorize(tid.astype(str), sort=False)
    as_int = pd.to_numeric(pd.Series(uniq), errors="coerce").to_numpy()
    track = np.append(as_int, np.nan)[codes]  # code -1 (missing) -> NaN
    ok = np.isfinite(track) & (np.abs(track) < 2**62)
    return np.where(ok & (track != stream), track, stream).astype(np.int64)


def op_table(c: Chunk) -> pd.DataFrame:
    idx, args, _, cols = _base(c, c.rows(S.OP_CATEGORIES))
    cols[S.CAT] = col.text(c.category[idx])
    # PyTorch 1.8's Kineto wrote "Input dims" (lower-case d); later versions "Input Dims"
    dims, types, concrete = _columns(_shared(list(zip(arg_or(args, "Input Dims", "Input dims"), arg(args, "Input type"),
                                                      arg(args, "Concrete Inputs")))), 3)
    cols[S.EXTERNAL_ID] = col.ints(arg_or(args, "External id", "external id"))
    cols[S.SEQUENCE] = col.ints(arg(args, "Sequence number"))
    cols[S.INPUT_DIMS] = dims
    cols[S.INPUT_TYPES] = types
    cols[S.CONCRETE_INPUTS] = concrete
    return pd.DataFrame(cols)


def collective_table(c: Chunk) -> pd.DataFrame:
    """NCCL kernels and ``record_param_comms`` ops that carry a "Collective name": the fields of
    ``S.COLLECTIVE_ARGS`` as typed columns, keyed by ``event``. A table of its own, a few rows per step: as
    columns of the kernel and op tables the ten fields cost a third more op-table memory on a single-GPU trace."""
    idx = c.rows((S.CAT_KERNEL, S.CAT_OP))
    idx = idx[c.fields.phase[idx] == X]
    has = map(dict.__contains__, take(c.fields.args_or_empty, idx.tolist()), repeat("Collective name"))
    idx = idx[np.fromiter(has, dtype=bool, count=len(idx))]
    args = take(c.fields.args_or_empty, idx.tolist())
    cols: dict[str, Any] = {S.EVENT: idx, S.CAT: col.text(c.category[idx])}
    for raw, (name, kind) in S.COLLECTIVE_ARGS.items():
        values = arg(args, raw)
        cols[name] = col.ints(values) if kind == "int" else col.text(["" if v is None else str(v) for v in values])
    return pd.DataFrame(cols)


def call_table(c: Chunk) -> pd.DataFrame:
    idx, args, names, cols = _base(c, c.rows(S.CALL_CATEGORIES))
    cols[S.CAT] = col.text(c.category[idx])
    cols[S.CORRELATION] = col.ints(arg(args, "correlation"))
    cols[S.EXTERNAL_ID] = col.ints(arg_or(args, "External id", "external id"))
    # ROCm launch calls carry the launch parameters (ingest.rocm); CUDA calls have none (0)
    _triples(cols, arg(args, "grid"), arg(args, "block"))
    cols[S.SHARED_MEM] = col.ints(arg(args, "shared memory"), default=0)
    cols[S.SYNC_KIND] = list(map(S.SYNC_CALLS.get, names, repeat("")))
    return pd.DataFrame(cols)


def sync_table(c: Chunk) -> pd.DataFrame:
    """``cuda_sync`` events (CUPTI synchronization records) on the GPU timeline."""
    idx, args, _, cols = _base(c, c.rows((S.CAT_SYNC,)))
    cols[S.SYNC_KIND] = [str(v) for v in arg(args, "cuda_sync_kind", "")]
    cols[S.STREAM] = col.ints(arg(args, "stream"))
    cols[S.CORRELATION] = col.ints(arg(args, "correlation"))
    return pd.DataFrame(cols)


def annotation_table(c: Chunk) -> pd.DataFrame:
    """GPU-side annotations (``gpu_user_annotation``): spans over the kernels of a CPU annotation."""
    idx, args, _, cols = _base(c, c.rows((S.CAT_GPU_ANNOTATION,)))
    cols[S.EXTERNAL_ID] = col.ints(arg_or(args, "External id", "external id"))
    return pd.DataFrame(cols)


# The flow table's rows of flow events (ph s/f/t) of no known flow category (a "cat" dropped or renamed): they bind to
# nothing ingest links, but they keep their place inside the slice they sit in when the replay moves it (issue 33's
# fuzz, 2026-11-27: an ac2g "f" without its "cat" stayed at its old time and left the kernel it was bound to).
FLOW_OTHER = ""
LINKED_FLOWS = (S.CAT_FLOW_LAUNCH, S.CAT_FLOW_FWDBWD)
FLOW_CATEGORIES = LINKED_FLOWS + (FLOW_OTHER,)


def flow_part(c: Chunk, cat: str) -> pd.DataFrame:
    """The flow table's rows of one category (launch or forward/backward flows; FLOW_OTHER: flow events of any
    other category)."""
    f = c.fields
    flow = (f.phase == FLOW_S) | (f.phase == FLOW_F) | (f.phase == FLOW_T)
    if cat == FLOW_OTHER:
        flow[c.rows(LINKED_FLOWS)] = False
        idx = np.flatnonzero(flow)
    else:
        idx = c.rows((cat,))
        idx = idx[flow[idx]]
    rows = idx.tolist()
    return pd.DataFrame({
        S.EVENT: idx,
        S.CAT: cat,
        S.PHASE: col.text(take(f.ph, rows)),
        S.FLOW_ID: col.ints(list(map(dict.get, take(c.events, rows), repeat("id")))),
        S.PID: f.strings_at("pid", idx, c.events),
        S.TID: f.strings_at("tid", idx, c.events),
        S.TS: f.ns_at("ts", idx),
    })


def memory_table(c: Chunk) -> pd.DataFrame:
    """``[memory]`` instant events: allocator deltas and totals per device."""
    idx = c.rows(("[memory]",))
    phase = c.fields.phase[idx]
    idx = idx[(phase == INSTANT) | (phase == INSTANT_UPPER)]
    args = take(c.fields.args_or_empty, idx.tolist())
    return pd.DataFrame({
        S.EVENT: idx,
        S.TS: c.fields.ns_at("ts", idx),
        "device_type": col.ints(arg(args, "Device Type")),
        "device_id": col.ints(arg(args, "Device Id")),
        "bytes": col.ints(arg(args, "Bytes"), default=0),
        "total_allocated": col.ints(arg(args, "Total Allocated")),
        "total_reserved": col.ints(arg(args, "Total Reserved")),
    })


def event_times(events: Sequence[Any] | EventFields) -> tuple[np.ndarray, np.ndarray]:
    """Every event's ts and dur in int64 ns (NO_TIME where absent: metadata, non-X dur, non-objects)."""
    f = events if isinstance(events, EventFields) else EventFields.of(events)
    ts_all, dur_all = f.ns("ts"), f.ns("dur")
    if ts_all is not None and dur_all is not None:  # every time a number or null: as the per-event rule gives
        ts_ns = np.where(f.phase == M, NO_TIME, ts_all)
        dur_ns = np.where(f.phase == X, dur_all, NO_TIME)
    else:
        ts = [t if p != "M" else None for p, t in zip(f.ph, f.ts)]
        dur = [d if p == "X" else None for p, d in zip(f.ph, f.dur)]
        ts_ns = col.us_to_ns(col.floats(ts))
        dur_ns = col.us_to_ns(col.floats(dur))
    dur_ns[ts_ns == NO_TIME] = NO_TIME
    return ts_ns, dur_ns

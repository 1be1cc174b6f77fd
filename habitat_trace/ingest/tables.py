"""Turn the raw ``traceEvents`` list into typed pandas tables (GPU events, ops, calls, flows, ...).

One pass buckets event indices by category; each table is then built column by column.
Nothing here links tables together: that is ``linking``'s job.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import orjson
import pandas as pd

from habitat_trace.ingest import columns as col
from habitat_trace.ingest import schema as S

EMPTY_ARGS: dict[str, Any] = {}
_ABSENT = object()  # a key that is not there (unlike one set to null)
_NO_CAT = object()  # an event without "cat" (metadata, [memory] instants)
CAT_INSTANT = "cpu_instant_event"
_NOT_EVENT = 1.5  # a traceEvents entry that is not an object: no category string, never bucketed
NO_TIME = col.NO_TIME  # one sentinel for every int64 ns column (columns.py)


def bucket_events(events: list[Any]) -> dict[str, list[int]]:
    """Indices of events per normalized category; ``"[memory]"`` collects memory instants.

    One comprehension reads every category; the grouping is vectorized on factorized codes.
    """
    cats = [e.get("cat", _NO_CAT) if type(e) is dict else _NOT_EVENT for e in events]
    try:
        codes, uniq = pd.factorize(pd.Series(cats, dtype=object), sort=False, use_na_sentinel=False)
    except TypeError:  # an unhashable category (a list): such events are never bucketed
        cats = [c if c is None or c is _NO_CAT or isinstance(c, str) else _NOT_EVENT for c in cats]
        codes, uniq = pd.factorize(pd.Series(cats, dtype=object), sort=False, use_na_sentinel=False)
    order = np.argsort(codes, kind="stable")  # stable: indices stay ascending within a category
    bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    buckets: dict[str, list[int]] = defaultdict(list)
    for k, cat in enumerate(uniq):
        rows = order[bounds[k]:bounds[k + 1]].tolist()
        if cat is _NO_CAT or (not isinstance(cat, str) and pd.isna(cat)):  # factorize turns None into nan
            mem = [i for i in rows if events[i].get("name") == "[memory]"]
            if mem:
                buckets["[memory]"].extend(mem)
        elif isinstance(cat, str):
            buckets[S.CATEGORY_ALIASES.get(cat, cat)].extend(rows)
            if cat == CAT_INSTANT:  # torch >= 1.13 writes [memory] instants with this category
                buckets["[memory]"].extend(i for i in rows if events[i].get("name") == "[memory]")
    for rows in buckets.values():
        rows.sort()
    return buckets


def _args(evs: list[dict]) -> list[dict]:
    out = []
    for e in evs:
        a = e.get("args")
        out.append(a if type(a) is dict else EMPTY_ARGS)
    return out


def _external_ids(ext: list[Any], ext21: list[Any]) -> np.ndarray:
    """``External id`` where the key is present, else the 2021 spelling ``external id``."""
    return col.ints([e if e is not _ABSENT else e21 for e, e21 in zip(ext, ext21)])


def _base(events: list[Any], idx: list[int],
          phase: str = "X") -> tuple[list[int], list[dict], list[dict], dict[str, Any]]:
    """Common columns of duration events, and their args dicts; drops events of another phase.

    One pass over the events pulls every common field (a comprehension per field costs a
    Python-level loop each); pid/tid are stringified once per distinct value.
    """
    idx = [i for i in idx if events[i].get("ph") == phase]
    evs = [events[i] for i in idx]
    rows = [(e.get("name", ""), e.get("pid", ""), e.get("tid", ""), e.get("ts"), e.get("dur"), e.get("args"))
            for e in evs]
    names, pids, tids, ts, dur, args = (list(c) for c in zip(*rows)) if rows else ([], [], [], [], [], [])
    cols: dict[str, Any] = {
        S.EVENT: np.array(idx, dtype=np.int64),
        S.NAME: _text([n if type(n) is str else str(n) for n in names]),
        S.PID: _strings(pids),
        S.TID: _strings(tids),
        S.TS: col.us_to_ns(col.floats(ts)),
    }
    if phase == "X":
        cols[S.DUR] = col.us_to_ns(col.floats(dur))
    return idx, evs, [a if type(a) is dict else EMPTY_ARGS for a in args], cols


def _text(values: list[str]) -> Any:
    """A string column that stays a string column when empty (pandas makes ``[]`` float64). Equal
    strings share one object: a parsed trace holds a new str per event (a 60-byte "cpu_op" each)."""
    seen: dict[str, str] = {}
    return pd.array([seen.setdefault(v, v) for v in values], dtype="str")


def _shared(rows: list[tuple]) -> list[tuple]:
    """Equal rows as one object. An op's Input Dims, Input type and Concrete Inputs repeat every step,
    and a parsed trace holds new lists and strings for each op (1.2x the file of a 50-step GPT-2 trace).
    Rows are equal when their JSON is; JSON writes both None and NaN as null, so a row whose JSON has a
    null joins another only when they also compare equal (NaN never does). A row orjson cannot write
    (an int past 64 bits, possible only from the json-module fallback) leaves the rows unshared."""
    try:
        keys = list(map(orjson.dumps, rows))
    except orjson.JSONEncodeError:
        return rows
    seen: dict[bytes, tuple] = {}
    return [s if (s := seen.setdefault(k, r)) is r or b"null" not in k or s == r else r
            for k, r in zip(keys, rows)]


def _strings(values: list[Any]) -> np.ndarray:
    """``str(v)`` for each value, computed once per distinct value (pids and tids repeat a lot).

    Hashing groups values that compare equal (1, 1.0, True; None and nan), so only ints and strings
    take the grouped path; anything else is stringified one by one.
    """
    types = set(map(type, values))
    if types == {int}:
        try:
            codes, uniq = pd.factorize(np.array(values, dtype=np.int64), sort=False)
        except OverflowError:
            return np.array([str(v) for v in values], dtype=object)
    elif types <= {int, str}:
        codes, uniq = pd.factorize(pd.Series(values, dtype=object), sort=False, use_na_sentinel=False)
    else:
        return np.array([str(v) for v in values], dtype=object)
    return np.array([str(u) for u in uniq] or [""], dtype=object)[codes]


def _columns(rows: list[tuple], n: int) -> list[list[Any]]:
    """Transpose per-event tuples into ``n`` column lists."""
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


def gpu_table(events: list[Any], buckets: dict[str, list[int]]) -> pd.DataFrame:
    idx = sorted(i for c in S.GPU_CATEGORIES for i in buckets.get(c, ()))
    idx, evs, args, cols = _base(events, idx)
    cols[S.CAT] = _text([S.CATEGORY_ALIASES.get(e["cat"], e["cat"]) for e in evs])
    # one pass over the args dicts (a comprehension per field would loop 14 times)
    (device, stream, corr, ext, ext21, grid, block, regs, smem, nbytes, bpsm, wpsm, occ) = _columns([(
        a.get("device"), a.get("stream"), a.get("correlation"), a.get("External id", _ABSENT), a.get("external id"),
        a.get("grid"), a.get("block"), a.get("registers per thread"), a.get("shared memory"), a.get("bytes"),
        a.get("blocks per SM"), a.get("warps per SM"), a.get("est. achieved occupancy %")) for a in args], 13)
    cols[S.DEVICE] = col.ints(device, default=0)
    cols[S.STREAM] = col.ints(stream)
    cols[S.CORRELATION] = col.ints(corr)
    cols[S.EXTERNAL_ID] = _external_ids(ext, ext21)
    grid3, block3 = col.triples(grid), col.triples(block)
    cols[S.GRID_X], cols[S.GRID_Y], cols[S.GRID_Z] = grid3[:, 0], grid3[:, 1], grid3[:, 2]
    cols[S.BLOCK_X], cols[S.BLOCK_Y], cols[S.BLOCK_Z] = block3[:, 0], block3[:, 1], block3[:, 2]
    cols[S.REGISTERS] = col.ints(regs, default=0)
    cols[S.SHARED_MEM] = col.ints(smem, default=0)
    cols[S.BYTES] = col.ints(nbytes, default=0)
    cols[S.CUPTI_BLOCKS_PER_SM] = col.floats(bpsm)
    cols[S.CUPTI_WARPS_PER_SM] = col.floats(wpsm)
    cols[S.CUPTI_OCCUPANCY] = col.floats(occ)
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


def op_table(events: list[Any], buckets: dict[str, list[int]]) -> pd.DataFrame:
    idx = sorted(i for c in S.OP_CATEGORIES for i in buckets.get(c, ()))
    idx, evs, args, cols = _base(events, idx)
    cols[S.CAT] = _text([S.CATEGORY_ALIASES.get(e["cat"], e["cat"]) for e in evs])
    ext, ext21, seq = _columns([(a.get("External id", _ABSENT), a.get("external id"), a.get("Sequence number"))
                                for a in args], 3)
    # PyTorch 1.8's Kineto wrote "Input dims" (lower-case d); later versions "Input Dims"
    dims, types, concrete = _columns(_shared([(a.get("Input Dims", a.get("Input dims")), a.get("Input type"),
                                               a.get("Concrete Inputs")) for a in args]), 3)
    cols[S.EXTERNAL_ID] = _external_ids(ext, ext21)
    cols[S.SEQUENCE] = col.ints(seq)
    cols[S.INPUT_DIMS] = dims
    cols[S.INPUT_TYPES] = types
    cols[S.CONCRETE_INPUTS] = concrete
    return pd.DataFrame(cols)


def _has_collective(e: dict) -> bool:
    a = e.get("args")
    return e.get("ph") == "X" and type(a) is dict and "Collective name" in a


def collective_table(events: list[Any], buckets: dict[str, list[int]]) -> pd.DataFrame:
    """NCCL kernels and ``record_param_comms`` ops that carry a "Collective name": the fields of
    ``S.COLLECTIVE_ARGS`` as typed columns, keyed by ``event``. A table of its own, a few rows per step: as
    columns of the kernel and op tables the ten fields cost a third more op-table memory on a single-GPU trace."""
    idx = sorted(i for c in (S.CAT_KERNEL, S.CAT_OP) for i in buckets.get(c, ()) if _has_collective(events[i]))
    args = _args([events[i] for i in idx])
    cols: dict[str, Any] = {S.EVENT: np.array(idx, dtype=np.int64),
                            S.CAT: _text([S.CATEGORY_ALIASES.get(events[i]["cat"], events[i]["cat"]) for i in idx])}
    for raw, (name, kind) in S.COLLECTIVE_ARGS.items():
        values = [a.get(raw) for a in args]
        cols[name] = col.ints(values) if kind == "int" else _text(["" if v is None else str(v) for v in values])
    return pd.DataFrame(cols)


def call_table(events: list[Any], buckets: dict[str, list[int]]) -> pd.DataFrame:
    idx = sorted(i for c in S.CALL_CATEGORIES for i in buckets.get(c, ()))
    idx, evs, args, cols = _base(events, idx)
    cols[S.CAT] = _text([S.CATEGORY_ALIASES.get(e["cat"], e["cat"]) for e in evs])
    corr, ext, ext21, grid, block, smem = _columns([
        (a.get("correlation"), a.get("External id", _ABSENT), a.get("external id"), a.get("grid"), a.get("block"),
         a.get("shared memory")) for a in args], 6)
    cols[S.CORRELATION] = col.ints(corr)
    cols[S.EXTERNAL_ID] = _external_ids(ext, ext21)
    # ROCm launch calls carry the launch parameters (ingest.rocm); CUDA calls have none (0)
    grid3, block3 = col.triples(grid), col.triples(block)
    cols[S.GRID_X], cols[S.GRID_Y], cols[S.GRID_Z] = grid3[:, 0], grid3[:, 1], grid3[:, 2]
    cols[S.BLOCK_X], cols[S.BLOCK_Y], cols[S.BLOCK_Z] = block3[:, 0], block3[:, 1], block3[:, 2]
    cols[S.SHARED_MEM] = col.ints(smem, default=0)
    cols[S.SYNC_KIND] = [S.SYNC_CALLS.get(n, "") for n in cols[S.NAME]]
    return pd.DataFrame(cols)


def sync_table(events: list[Any], buckets: dict[str, list[int]]) -> pd.DataFrame:
    """``cuda_sync`` events (CUPTI synchronization records) on the GPU timeline."""
    idx, evs, args, cols = _base(events, buckets.get(S.CAT_SYNC, []))
    cols[S.SYNC_KIND] = [str(a.get("cuda_sync_kind", "")) for a in args]
    cols[S.STREAM] = col.ints([a.get("stream") for a in args])
    cols[S.CORRELATION] = col.ints([a.get("correlation") for a in args])
    return pd.DataFrame(cols)


def annotation_table(events: list[Any], buckets: dict[str, list[int]]) -> pd.DataFrame:
    """GPU-side annotations (``gpu_user_annotation``): spans over the kernels of a CPU annotation."""
    idx, evs, args, cols = _base(events, buckets.get(S.CAT_GPU_ANNOTATION, []))
    cols[S.EXTERNAL_ID] = _external_ids([a.get("External id", _ABSENT) for a in args],
                                        [a.get("external id") for a in args])
    return pd.DataFrame(cols)


FLOW_CATEGORIES = (S.CAT_FLOW_LAUNCH, S.CAT_FLOW_FWDBWD)


def flow_part(events: list[Any], buckets: dict[str, list[int]], cat: str) -> pd.DataFrame:
    """The flow table's rows of one category (launch or forward/backward flows)."""
    idx = [i for i in buckets.get(cat, ()) if events[i].get("ph") in ("s", "f", "t")]
    ph, fid, pid, tid, ts = _columns([(e["ph"], e.get("id"), e.get("pid", ""), e.get("tid", ""), e.get("ts"))
                                      for e in (events[i] for i in idx)], 5)
    return pd.DataFrame({
        S.EVENT: np.array(idx, dtype=np.int64),
        S.CAT: cat,
        S.PHASE: _text(ph),
        S.FLOW_ID: col.ints(fid),
        S.PID: _strings(pid),
        S.TID: _strings(tid),
        S.TS: col.us_to_ns(col.floats(ts)),
    })


def memory_table(events: list[Any], buckets: dict[str, list[int]]) -> pd.DataFrame:
    """``[memory]`` instant events: allocator deltas and totals per device."""
    idx = [i for i in buckets.get("[memory]", ()) if events[i].get("ph") in ("i", "I")]
    evs = [events[i] for i in idx]
    args = _args(evs)
    return pd.DataFrame({
        S.EVENT: np.array(idx, dtype=np.int64),
        S.TS: col.us_to_ns(col.floats([e.get("ts") for e in evs])),
        "device_type": col.ints([a.get("Device Type") for a in args]),
        "device_id": col.ints([a.get("Device Id") for a in args]),
        "bytes": col.ints([a.get("Bytes") for a in args], default=0),
        "total_allocated": col.ints([a.get("Total Allocated") for a in args]),
        "total_reserved": col.ints([a.get("Total Reserved") for a in args]),
    })


NOT_OBJECT = object()  # EventFields.ph of a traceEvents entry that is not an object


@dataclass(frozen=True)
class EventFields:
    """What is read of every event of a chunk, in one pass: ph, ts, dur, pid and tid as parsed (None where absent;
    ph NOT_OBJECT and the rest None for an entry that is not an object). Event times and the Perfetto rules
    (rules.Checker) read these instead of each reading the dicts again."""

    ph: Sequence[Any]
    ts: Sequence[Any]
    dur: Sequence[Any]
    pid: Sequence[Any]
    tid: Sequence[Any]

    @classmethod
    def of(cls, events: Sequence[Any]) -> "EventFields":
        none = (NOT_OBJECT, None, None, None, None)
        rows = [(e.get("ph"), e.get("ts"), e.get("dur"), e.get("pid"), e.get("tid")) if type(e) is dict else none
                for e in events]
        return cls(*zip(*rows)) if rows else cls((), (), (), (), ())


def event_times(events: Sequence[Any] | EventFields) -> tuple[np.ndarray, np.ndarray]:
    """Every event's ts and dur in int64 ns (NO_TIME where absent: metadata, non-X dur, non-objects)."""
    f = events if isinstance(events, EventFields) else EventFields.of(events)
    ts = [t if p != "M" else None for p, t in zip(f.ph, f.ts)]
    dur = [d if p == "X" else None for p, d in zip(f.ph, f.dur)]
    ts_ns = col.us_to_ns(col.floats(ts))
    dur_ns = col.us_to_ns(col.floats(dur))
    dur_ns[ts_ns == NO_TIME] = NO_TIME
    return ts_ns, dur_ns

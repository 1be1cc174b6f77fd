"""Build the ingest tables chunk by chunk, so that only one chunk of event dicts is alive at a time.

Contract: ``assemble(chunks) -> Parts`` gives the same tables (rows, order, dtypes) as building them from
the whole event list at once: each table builder reads one event at a time, so a chunk's rows only need
their ``event`` column shifted by the chunk's first index. The flow table is two parts (launch, then
forward/backward flows) whose dtypes depend on whether a part is empty: each part is assembled on its
own and the two are then concatenated, launch flows first. Also records every event's origin ts/dur
(replay needs them, not the dicts) and feeds each chunk to the Perfetto-rule checker (rules.Checker), so the
input's own violations, which every written trace records, cost no second parse.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest import rules, tables
from habitat_trace.ingest.fields import EventFields

AMD_SNIFF_CALLS = 50  # runtime calls looked at for a hip* name (ROCm traces name every call hip*)
BUILDERS: dict[str, Callable[[tables.Chunk], pd.DataFrame]] = {
    "gpu": tables.gpu_table, "ops": tables.op_table, "calls": tables.call_table, "syncs": tables.sync_table,
    "gpu_annotations": tables.annotation_table, "memory": tables.memory_table, "collectives": tables.collective_table,
    **{cat: partial(tables.flow_part, cat=cat) for cat in tables.FLOW_CATEGORIES},
}


@dataclass(frozen=True)
class Parts:
    gpu: pd.DataFrame
    ops: pd.DataFrame
    calls: pd.DataFrame
    syncs: pd.DataFrame
    gpu_annotations: pd.DataFrame
    flows: pd.DataFrame
    memory: pd.DataFrame
    collectives: pd.DataFrame  # NCCL fields of kernels and record_param_comms ops (tables.collective_table)
    ts_ns: np.ndarray  # per event: origin ts, tables.NO_TIME where absent
    dur_ns: np.ndarray
    hip: bool  # a hip* call among the first AMD_SNIFF_CALLS runtime calls
    violations: tuple[rules.Violation, ...]  # the events' Perfetto-rule violations (rules.check_events)


def assemble(chunks: Iterable[tuple[int, list[Any], list[EventFields]]]) -> Parts:
    """Tables of the events given as ``(index of the first event, events, fields)`` chunks, in order; ``fields``: the
    EventFields of consecutive runs of the chunk's events (ingest.events.Events.read), or none (read here)."""
    frames: dict[str, list[pd.DataFrame]] = {name: [] for name in BUILDERS}
    ts: list[np.ndarray] = []
    dur: list[np.ndarray] = []
    seen, hip = 0, False
    checker = rules.Checker()
    for first, events, parts in chunks:
        chunk = tables.Chunk.of(events, EventFields.join(parts) if parts else None)
        for name, build in BUILDERS.items():
            df = build(chunk)
            if first:
                df[S.EVENT] += first
            frames[name].append(df)
        t, d = tables.event_times(chunk.fields)
        checker.feed(first, events, chunk.fields)
        ts.append(t)
        dur.append(d)
        calls = chunk.rows((S.CAT_RUNTIME,))[:max(AMD_SNIFF_CALLS - seen, 0)].tolist()
        seen += len(calls)
        hip = hip or any(str(events[i].get("name", "")).startswith("hip") for i in calls)
        del events, chunk, parts  # before the next chunk is parsed
    if not ts:
        return assemble([(0, [], [])])
    violations = tuple(checker.violations())  # before the tables are joined: the two peaks do not add up
    del checker
    out = {}
    for name in list(frames):  # each table's chunk parts dropped once joined: only one table is ever twice in memory
        out[name] = _concat(frames.pop(name))
    out["flows"] = pd.concat([out.pop(cat) for cat in tables.FLOW_CATEGORIES], ignore_index=True)
    return Parts(**out, ts_ns=np.concatenate(ts), dur_ns=np.concatenate(dur), hip=hip, violations=violations)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """One table from the chunks' tables; empty ones are left out (their columns' dtypes can differ)."""
    full = [p for p in parts if len(p)]
    if len(full) == 1:
        return full[0]
    return pd.concat(full, ignore_index=True) if full else parts[0]


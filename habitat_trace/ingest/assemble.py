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
    whole = Assembly()
    whole.feed_all(chunks)
    return whole.parts()


class Assembly:
    """The tables' chunk parts so far: ``feed`` consecutive chunks, ``extend`` by the assembly of the chunks that
    follow (ingest/halves.py builds a large trace's second half in another process), then ``parts()`` once."""

    def __init__(self) -> None:
        self.frames: dict[str, list[pd.DataFrame]] = {name: [] for name in BUILDERS}
        self.ts: list[np.ndarray] = []
        self.dur: list[np.ndarray] = []
        self.checker = rules.Checker()
        self.sniffed: list[str] = []  # the names of the first AMD_SNIFF_CALLS runtime calls

    def feed(self, first: int, events: list[Any], parts: list[EventFields]) -> None:
        chunk = tables.Chunk.of(events, EventFields.join(parts) if parts else None)
        for name, build in BUILDERS.items():
            df = build(chunk)
            if first:
                df[S.EVENT] += first
            self.frames[name].append(df)
        t, d = tables.event_times(chunk.fields)
        self.checker.feed(first, events, chunk.fields)
        self.ts.append(t)
        self.dur.append(d)
        calls = chunk.rows((S.CAT_RUNTIME,))[:max(AMD_SNIFF_CALLS - len(self.sniffed), 0)].tolist()
        self.sniffed += [str(events[i].get("name", "")) for i in calls]

    def feed_all(self, chunks: Iterable[tuple[int, list[Any], list[EventFields]]]) -> None:
        """``feed`` each chunk, in order, none kept alive while the next is parsed."""
        for first, events, parts in chunks:
            self.feed(first, events, parts)
            del events, parts

    def extend(self, later: "Assembly") -> None:
        """Append ``later``'s chunks (those right after this one's last)."""
        for name, frames in later.frames.items():
            self.frames[name] += frames
        self.ts += later.ts
        self.dur += later.dur
        self.checker.extend(later.checker)
        self.sniffed = (self.sniffed + later.sniffed)[:AMD_SNIFF_CALLS]

    def parts(self) -> Parts:
        """The joined tables (each table's chunk parts dropped once joined: only one table is ever twice in
        memory); the assembly is spent."""
        if not self.ts:
            return assemble([(0, [], [])])
        violations = tuple(self.checker.violations())  # before the tables are joined: the two peaks do not add up
        self.checker = rules.Checker()
        out = {}
        for name in list(self.frames):
            out[name] = _concat(self.frames.pop(name))
        out["flows"] = pd.concat([out.pop(cat) for cat in tables.FLOW_CATEGORIES], ignore_index=True)
        hip = any(name.startswith("hip") for name in self.sniffed)
        return Parts(**out, ts_ns=np.concatenate(self.ts), dur_ns=np.concatenate(self.dur), hip=hip,
                     violations=violations)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """One table from the chunks' tables; empty ones are left out (their columns' dtypes can differ)."""
    full = [p for p in parts if len(p)]
    if len(full) == 1:
        return full[0]
    return pd.concat(full, ignore_index=True) if full else parts[0]


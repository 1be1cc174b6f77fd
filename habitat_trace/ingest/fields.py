"""Every event's common fields read once per chunk, and the columns derived from them, shared by the table builders.

Contract: ``EventFields.of(events)`` reads ph, ts, dur, pid, tid, cat, name and args of each event, one C-level
``map(dict.get, ...)`` per field when every entry is a plain dict; the columns derived from them (ph codes, times as
float64 and int64 ns, pid/tid strings, names) are computed once for the whole chunk and taken by row for each table
(``*_at``). A taker gives exactly what the per-table code gave on the same rows (tests/test_fields.py): where the
chunk holds a value the whole-chunk path cannot vouch for (a string time, a null pid, a non-string name), it runs that
per-table code on the rows asked for. Before, each builder read its events' fields itself: 22M ``dict.get`` calls
on issue 34's 1.12M-event trace (docs/performance.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Hashable, Sequence

import numpy as np
import pandas as pd

from habitat_trace.ingest import columns as col

NOT_OBJECT = object()  # EventFields.ph of a traceEvents entry that is not an object
NO_CAT = object()  # EventFields.cat of an event without "cat" (metadata, [memory] instants)
NOT_EVENT = 1.5  # EventFields.cat of an entry that is not an object: no category string, never bucketed
EMPTY_ARGS: dict[str, Any] = {}
# ph codes (EventFields.phase): the phases the builders and the Perfetto rules tell apart; 0 is any other ph
OTHER, X, M, FLOW_S, FLOW_F, FLOW_T, INSTANT, INSTANT_UPPER, NOT_OBJECT_PH = range(9)
PHASES: dict[Any, int] = {"X": X, "M": M, "s": FLOW_S, "f": FLOW_F, "t": FLOW_T, "i": INSTANT,
                           "I": INSTANT_UPPER, NOT_OBJECT: NOT_OBJECT_PH}
_KEYS = ("ph", "ts", "dur", "pid", "tid", "cat", "name", "args")
_DEFAULTS = (None, None, None, None, None, NO_CAT, "", None)  # what each key reads as when absent
_NONE_ROW = (NOT_OBJECT, None, None, None, None, NOT_EVENT, "", None)  # a traceEvents entry that is not an object
_JOINED = ("phase", "args_or_empty", "_numbers", "_ns", "_id_strings")  # computed by ``read``, joined by ``join``


def take(values: Sequence[Any], idx: Sequence[int]) -> list[Any]:
    """``[values[i] for i in idx]`` in one C call."""
    if len(idx) > 1:
        return list(itemgetter(*idx)(values))
    return [values[i] for i in idx]


def arg(args: list[dict[str, Any]], key: str, default: Any = None) -> list[Any]:
    """``[a.get(key, default) for a in args]`` (``args``: plain dicts) in one C call."""
    return list(map(dict.get, args, repeat(key), repeat(default)))


def arg_or(args: list[dict[str, Any]], key: str, other: str) -> list[Any]:
    """``[a.get(key, a.get(other)) for a in args]``: a key with an older spelling (``External id``/``external id``,
    ``Input Dims``/``Input dims``)."""
    return list(map(dict.get, args, repeat(key), map(dict.get, args, repeat(other))))


@dataclass(frozen=True)
class EventFields:
    """What is read of every event of a chunk, as parsed: ph, ts, dur, pid, tid and args (None where absent), cat
    (NO_CAT where absent) and name ("" where absent); an entry that is not an object reads as ``_NONE_ROW`` (ph
    NOT_OBJECT, cat NOT_EVENT). The table builders, the event times and the Perfetto rules (rules.Checker) read
    these instead of each reading the dicts again."""

    ph: Sequence[Any]
    ts: Sequence[Any]
    dur: Sequence[Any]
    pid: Sequence[Any]
    tid: Sequence[Any]
    cat: Sequence[Any]
    name: Sequence[Any]
    args: Sequence[Any]

    @classmethod
    def of(cls, events: Sequence[Any]) -> "EventFields":
        if set(map(type, events)) == {dict}:  # the usual chunk: one C-level pass per field
            return cls(*(list(map(dict.get, events, repeat(k), repeat(d))) for k, d in zip(_KEYS, _DEFAULTS)))
        rows = [tuple(e.get(k, d) for k, d in zip(_KEYS, _DEFAULTS)) if type(e) is dict else _NONE_ROW
                for e in events]
        return cls(*(list(c) for c in zip(*rows))) if rows else cls(*([] for _ in _KEYS))

    @classmethod
    def read(cls, events: Sequence[Any]) -> "EventFields":
        """``of``, with the per-event columns that ``join`` carries over (``_JOINED``) computed now: what ingest takes
        of each part of a chunk right after its parse, while the part's objects are still in the CPU's cache."""
        fields = cls.of(events)
        for name in _JOINED:
            getattr(fields, name)
        return fields

    @classmethod
    def join(cls, parts: Sequence["EventFields"]) -> "EventFields":
        """The fields of consecutive runs of events (each run's ``of`` or ``read``) as one: what ``of`` gives on all
        the events, with each column of ``_JOINED`` that every part has computed joined too (each is per event)."""
        if len(parts) == 1:
            return parts[0]
        out = cls(*(list(chain.from_iterable(getattr(p, k) for p in parts)) for k in _KEYS))
        if all("phase" in vars(p) for p in parts):
            vars(out)["phase"] = np.concatenate([p.phase for p in parts])
        if all("args_or_empty" in vars(p) for p in parts):
            vars(out)["args_or_empty"] = list(chain.from_iterable(p.args_or_empty for p in parts))
        for name in ("_numbers", "_ns", "_id_strings"):  # {key: column, or None where a part's rule is per value}
            if all(name in vars(p) for p in parts):
                columns = [vars(p)[name] for p in parts]
                vars(out)[name] = {key: None if any(c.get(key) is None for c in columns) else
                                   np.concatenate([c[key] for c in columns]) for key in columns[0]}
                if name == "_ns":  # a part without a key has a time past int64's range: the whole chunk goes per row
                    vars(out)[name] = {k: v for k, v in vars(out)[name].items() if v is not None}
        return out

    @cached_property
    def phase(self) -> np.ndarray:
        """int8 code of each event's ph (PHASES; OTHER for any other ph, an unhashable one included)."""
        try:
            return np.fromiter(map(PHASES.get, self.ph, repeat(OTHER)), dtype=np.int8, count=len(self.ph))
        except TypeError:
            return np.array([PHASES.get(p, OTHER) if isinstance(p, Hashable) else OTHER for p in self.ph],
                            dtype=np.int8)

    @cached_property
    def args_or_empty(self) -> list[dict[str, Any]]:
        """Each event's args, EMPTY_ARGS where they are not an object."""
        return [a if type(a) is dict else EMPTY_ARGS for a in self.args]

    def numbers(self, key: str) -> np.ndarray | None:
        """ts or dur of every event as float64 (NaN where None) when every value is an int, a float or None;
        else None (a string, a bool, an int past a double: the callers' per-value rules decide)."""
        return self._numbers[key]

    @cached_property
    def _numbers(self) -> dict[str, np.ndarray | None]:
        out: dict[str, np.ndarray | None] = {}
        for key in ("ts", "dur"):
            values = getattr(self, key)
            out[key] = None
            if set(map(type, values)) <= col.NUMBERS:
                try:
                    out[key] = np.array(values, dtype=np.float64)
                except OverflowError:
                    pass
        return out

    @cached_property
    def _ns(self) -> dict[str, np.ndarray]:
        """ts and dur in ns for the whole chunk, where ``numbers`` has them and each converts without numpy's
        warning of a cast out of int64's range (a time past 2**63 µs: per row then, as the warning was before)."""
        out = {}
        for key in ("ts", "dur"):
            arr = self.numbers(key)
            if arr is not None and not (np.abs(arr) >= 2.0 ** 63).any():  # NaN compares False: no cast, no warning
                out[key] = col.us_to_ns(arr)
        return out

    def ns(self, key: str) -> np.ndarray | None:
        """``us_to_ns`` of ``numbers(key)`` (None where that is None)."""
        return self._ns.get(key)

    def ns_at(self, key: str, idx: np.ndarray) -> np.ndarray:
        """``us_to_ns(floats([ts or dur of each row]))``: the int64 ns of rows ``idx``."""
        if key in self._ns:
            return self._ns[key][idx]
        return col.us_to_ns(col.floats(take(getattr(self, key), idx.tolist())))

    @cached_property
    def _id_strings(self) -> dict[str, np.ndarray | None]:
        # None stands for both an absent key and a null; the tables read an absent pid as "": per row then
        return {key: None if type(None) in set(map(type, values)) else col.strings(values)
                for key, values in (("pid", self.pid), ("tid", self.tid))}

    def id_strings(self, key: str) -> np.ndarray | None:
        """``str`` of every event's pid or tid (an object array), or None where one is null or absent."""
        return self._id_strings[key]

    def strings_at(self, key: str, idx: np.ndarray, events: Sequence[Any]) -> np.ndarray:
        """``strings([events[i].get(key, "") for i in idx])`` (pid or tid; ``events``: the chunk's)."""
        whole = self._id_strings[key]
        if whole is not None:
            return whole[idx]
        return col.strings([events[i].get(key, "") for i in idx.tolist()])

    @cached_property
    def _names(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Codes and distinct values of the names when all are strings (else None)."""
        if set(map(type, self.name)) != {str}:
            return None
        codes, uniq = pd.factorize(np.fromiter(self.name, dtype=object, count=len(self.name)), sort=False)
        return codes, np.asarray(uniq, dtype=object)

    def names_at(self, idx: np.ndarray) -> tuple[Any, list[str]]:
        """The name column of rows ``idx`` (columns.text of ``str(name)``), and its values as a list."""
        if self._names is not None:
            codes, uniq = self._names
            values = uniq[codes[idx]]
            return col.text(values), values.tolist()
        names = [n if type(n) is str else str(n) for n in take(self.name, idx.tolist())]
        return col.text(names), names

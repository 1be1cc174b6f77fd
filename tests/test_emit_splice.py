"""A large trace whose bytes are orjson's own is written by splicing its new times into those bytes (emit.splice,
issue 34), and the bytes are those of the plain write (every event parsed again, rewritten and dumped): on real
fixtures made compact, on a trace whose chunks are partly compact, and on generated events in every shape the
search must refuse or get right (times as strings, ints, exponents; missing keys; keys nested in args or after them;
unicode, escapes and brackets in strings)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from habitat_trace.emit import splice, writer
from habitat_trace.ingest import events as events_module
from habitat_trace.ingest import reader
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.events import Events
from habitat_trace.pipeline import Options, Run
from habitat_trace.pipeline.document import OCCUPANCY_KEYS, Rewrite, TargetDocument, target_document
from habitat_trace.scale.specs import load_catalog
from tests.conftest import DATA, MLP_FIXTURE

CATALOG = load_catalog(None)
FIXTURES = [MLP_FIXTURE.name, "a100_nccl_step5.json.gz", "amd_mi250_minitoy_rocm6.json.gz",
            "h200_neusight_bert_large-inf-512-8.pt.trace.json.gz", "fuzz_kernel_without_cat.pt.trace.json.gz",
            "emit_mlp_h100.pt.trace.json.gz"]  # the last one we wrote: its GPU args hold our keys


def _large(m: pytest.MonkeyPatch, chunk: int = 1 << 14) -> None:
    """Every document large (not kept parsed), cut into small chunks, so small fixtures take the large path."""
    m.setattr(events_module, "KEEP_PARSED_BYTES", 0)
    m.setattr(events_module, "CHUNK_BYTES", chunk)
    m.setattr(writer, "WRITE_CHUNK_BYTES", chunk // 2)


def _both(document: TargetDocument) -> tuple[bytes, bytes]:
    """(spliced where ingest found canonical chunks, every event parsed again): the writer's two ways."""
    events = document.events
    assert isinstance(events, Events)
    canonical = events.canonical
    spliced = b"".join(bytes(p) for p in writer.pieces(document))
    events.canonical = None  # no check ran: the plain write
    try:
        plain = b"".join(bytes(p) for p in writer.pieces(document))
    finally:
        events.canonical = canonical
    return spliced, plain


class _Spy:
    def __init__(self, m: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = splice.spliced

        def counted(*args: Any) -> bytes:
            self.calls += 1
            return real(*args)

        m.setattr(splice, "spliced", counted)


def _compact(src: Path, out: Path, loosen: int = -1) -> Path:
    """``src`` as orjson writes it, in a plain file; ``loosen``: that event written with a space after its colons
    (its chunk then is not orjson's own)."""
    doc = reader.read_document(src)
    data = orjson.dumps(doc)
    if loosen >= 0:
        ev = doc["traceEvents"][loosen]
        data = data.replace(orjson.dumps(ev), json.dumps(ev, ensure_ascii=False).encode(), 1)
    out.write_bytes(data)
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_a_compact_trace_is_spliced_to_the_plain_bytes(name: str, tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as m:
        _large(m)
        spy = _Spy(m)
        run = Run.open([_compact(DATA / name, tmp_path / "compact.json")], Options(CATALOG))
        events = run.ranks[0].tables.events
        assert isinstance(events, Events) and events.canonical
        for rr in (run.baseline().ranks[0], *(run.replay(t).ranks[0] for t in Options(CATALOG).targets("A100,H200"))):
            spliced, plain = _both(target_document(rr))
            assert spliced == plain
        assert spy.calls, "never spliced: the test compared the plain write with itself"


def test_only_the_chunks_that_are_orjsons_own_are_spliced(tmp_path: Path) -> None:
    """One event written with spaces: its chunk is parsed again, the others spliced; the bytes are the plain
    write's. A Kineto-formatted file (indented) has no such chunk and is written the plain way."""
    with pytest.MonkeyPatch.context() as m:
        _large(m)
        doc = reader.read_document(MLP_FIXTURE)
        middle = len(doc["traceEvents"]) // 2
        run = Run.open([_compact(MLP_FIXTURE, tmp_path / "mixed.json", loosen=middle)], Options(CATALOG))
        events = run.ranks[0].tables.events
        assert isinstance(events, Events) and events.canonical
        spans = writer._spans(events)
        assert spans is not None and any(not c for _, _, c in spans) and any(c for _, _, c in spans)
        assert not any(c and lo <= middle < hi for lo, hi, c in spans)
        spliced, plain = _both(target_document(run.replay(Options(CATALOG).targets("A100")[0]).ranks[0]))
        assert spliced == plain
        kineto = tmp_path / "kineto.json"
        kineto.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        run = Run.open([kineto], Options(CATALOG))
        assert run.ranks[0].tables.events.canonical == []


# --- generated events ----------------------------------------------------------------------------------------------
_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ['a"b', "back\\slash", "[x]", "{y}", ',"ts":1', '\\"ts\\":', "é€😀", "\u2028", "\x00\x1f"])
_number = st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
_time = _number | st.sampled_from(["12.5", "1e3", "", "x"]) | st.none() | st.booleans()
_scalar = _number | _text | st.none() | st.booleans()
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["ts", "dur", "x", "blocks per SM"]) | _text, inner, max_size=3), max_leaves=6)
# a GPU event's args as Kineto writes them (numbers, arrays of numbers), with the odd string or brace
_kineto_args = st.dictionaries(st.sampled_from([*OCCUPANCY_KEYS, "grid", "stream", 'q"ts', "External id"]),
                               _number | st.lists(_number, max_size=3) | _text, max_size=6)
_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", 'x"ts', 'y"dur']
# (the last two: a key whose bytes end in "ts": with an escaped quote before it)


@st.composite
def _event(draw: st.DrawFn) -> Any:
    shape = draw(st.integers(0, 19))
    if shape == 0:
        return draw(_scalar | st.lists(_scalar, max_size=2))  # not an object
    if shape < 10:  # Kineto's order, numeric times: the spliced kind
        odd = {'x"ts': draw(_number), 'y"dur': 1} if draw(st.booleans()) else {}
        return {"ph": "X", "cat": draw(_text), "name": draw(_text), "pid": draw(_number), "tid": draw(_number), **odd,
                "ts": draw(_number), **({"dur": draw(_number)} if draw(st.booleans()) else {}),
                "args": draw(_kineto_args | _value)}
    keys = draw(st.permutations(_KEYS))[:draw(st.integers(0, len(_KEYS)))]
    out: dict[str, Any] = {}
    for k in keys:
        if k in ("ts", "dur"):
            out[k] = draw(_time)
        elif k == "args":
            out[k] = draw(st.dictionaries(st.sampled_from([*OCCUPANCY_KEYS, "ts", "dur", "grid"]) | _text, _value,
                                          max_size=4) | _value)
        else:
            out[k] = draw(_value)
    return out


@st.composite
def _case(draw: st.DrawFn) -> tuple[list[Any], Rewrite]:
    events = draw(st.lists(_event(), min_size=1, max_size=40))
    n = len(events)
    objects = [i for i, e in enumerate(events) if isinstance(e, dict)]
    rows = np.array(sorted(draw(st.sets(st.sampled_from(objects)))) if objects else [], dtype=np.int64)
    gpu = np.array(sorted(draw(st.sets(st.sampled_from(objects)))) if objects else [], dtype=np.int64)
    ns = st.integers(-10**15, 10**17)
    ts = np.array(draw(st.lists(ns, min_size=n, max_size=n)), dtype=np.int64)
    dur = np.array(draw(st.lists(ns | st.just(NO_TIME), min_size=n, max_size=n)), dtype=np.int64)
    k = len(gpu)
    old = np.array(draw(st.lists(ns, min_size=k, max_size=k)), dtype=np.int64)
    method = np.array(draw(st.lists(st.sampled_from(["wave", "identity"]), min_size=k, max_size=k)), dtype=object)
    reason = np.array(draw(st.lists(st.sampled_from(["", "no launch", 'a "quoted" é']), min_size=k, max_size=k)),
                      dtype=object)
    if k and draw(st.integers(0, 4)) == 0:  # a trace we wrote: its GPU args hold our keys
        events[int(gpu[0])]["args"] = {"habitat_origin_dur_us": 1.5, "habitat_method": "x", "habitat_reason": "old"}
    occ = None
    if k and draw(st.booleans()):
        occ = (*(np.array(draw(st.lists(st.integers(0, 99), min_size=k, max_size=k)), dtype=np.int64)
                 for _ in range(2)),
               np.array(draw(st.lists(st.floats(0, 100), min_size=k, max_size=k))),
               np.array(draw(st.lists(st.booleans(), min_size=k, max_size=k))))
    return events, Rewrite(ts, dur, rows, gpu, old, method, reason, occ)


def _document(events: list[Any], rewrite: Rewrite, chunk: int) -> Iterator[TargetDocument]:
    raw = orjson.dumps({"schemaVersion": 1, "traceEvents": events})
    split = reader.split_document(raw)
    if split is None:  # no event with a "ph": not a trace the scanner takes
        return
    meta, lazy = split
    for _ in lazy.chunks():  # ingest's read: finds the canonical chunks
        pass
    assert lazy.canonical, "orjson's own bytes must be found canonical"
    yield TargetDocument(Path("generated.json"), meta, lazy, rewrite)


@given(_case(), st.sampled_from([1 << 6, 1 << 9, 1 << 14]))
@example(([{"ph": "X", "args": {"ts": 1}, "ts": 2.5, "dur": 1}, {"ph": "X", "name": "[", "ts": 3, "dur": 1}],
          Rewrite(np.array([10, 20]), np.array([30, NO_TIME]), np.array([0, 1]), np.array([], dtype=np.int64),
                  np.array([], dtype=np.int64), np.array([], dtype=object), np.array([], dtype=object), None)),
         1 << 14)  # a nested "ts" before the event's own (the parse path), a bracket in a name (spliced)
@example(([{"ph": "X", "ts": 1, "args": {"grid": [1]}, "id": 7},
           {"ph": "X", "ts": 1, "args": {"a": {"blocks per SM": 1}}}, {"ph": "X", "ts": 1, "args": {}},
           {"ph": "X", "ts": 1, "args": {"warps per SM": 2, "x": "}"}}],
          Rewrite(np.array([10, 20, 30, 40]), np.full(4, NO_TIME), np.array([0, 1, 2, 3]), np.array([0, 1, 2, 3]),
                  np.array([5, 6, 7, 8]), np.array(["wave"] * 4, dtype=object),
                  np.array(["", "r", "", ""], dtype=object),
                  (np.array([3, 3, 3, 3]), np.array([4, 4, 4, 4]), np.array([50.0, 50.0, 50.0, 50.0]),
                   np.array([True, True, True, True])))),
         1 << 14)  # GPU args: not the last key, an occupancy key nested in them, empty, a brace in a string
def test_generated_events_are_spliced_to_the_plain_bytes(case: tuple[list[Any], Rewrite], chunk: int) -> None:
    events, rewrite = case
    with pytest.MonkeyPatch.context() as m:
        _large(m, chunk)
        for document in _document(events, rewrite, chunk):
            try:
                plain_list = b"".join(bytes(p) for p in writer.pieces(
                    TargetDocument(document.source, document.meta, orjson.loads(orjson.dumps(events)), rewrite)))
            except TypeError:  # a retimed or GPU entry that is not an object: no writer can (both paths raise)
                with pytest.raises(TypeError):
                    _both(document)
                return
            spliced, plain = _both(document)
            assert spliced == plain == plain_list


def test_brackets_in_strings_before_the_key_are_proven_nested_ones_are_not() -> None:
    """A kernel named ``...{lambda()#1}...`` (13% of a ResNet-50 step's kernels) has its top-level "ts" proven (it
    took the parse path before); a "ts" after a nested object or array outside the strings is not, and a quote after
    an odd run of backslashes does not end a string while one after an even run does."""
    events = [{"ph": "X", "name": "k<{lambda()#1}>[2]", "ts": 1.5},  # brackets in a string: proven
              {"ph": "X", "a": {"ts": 7}, "ts": 2},  # the first "ts" is the nested one: not proven
              {"ph": "X", "name": 'a"{', "x": [1], "ts": 3},  # an escaped quote, then an array outside: not proven
              {"ph": "X", "name": 'a"{', "ts": 3.5},  # the brace after an escaped quote is in the string: proven
              {"ph": "X", "name": "\\", "b": "{[", "ts": 4},  # an escaped backslash ends before the quote: proven
              {"ph": "X", "ts": 5, "args": {"a": [1]}}]  # the key before any bracket: proven
    texts = [orjson.dumps(e) for e in events]
    raw = b",".join(texts)
    ends = np.cumsum([len(t) + 1 for t in texts]) - 1
    starts = ends - [len(t) for t in texts]
    at, end = splice._Keys(raw).number(starts, ends, b'"ts"')
    assert [raw[a:e] if a >= 0 else None for a, e in zip(at.tolist(), end.tolist())] == [b"1.5", None, None, b"3.5",
                                                                                         b"4", b"5"]


def test_a_number_runs_to_the_first_byte_no_number_holds() -> None:
    parts = [b'{"ts":-1.8446744073709552e+19,"dur":0}', b'{"a":{"ts":1},"ts":2}', b'{"ts":"3"}', b'{"x":"[","ts":4}',
             b'{"ph":"X","ts":5}']
    raw = b",".join(parts)
    buf = np.frombuffer(raw, dtype=np.uint8)
    ends = np.cumsum([len(p) + 1 for p in parts]) - 1
    starts = ends - [len(p) for p in parts]
    at, end = splice._Keys(raw).number(starts, ends, b'"ts"')
    found = [raw[a:b] if a >= 0 else None for a, b in zip(at.tolist(), end.tolist())]
    # a nested key before the event's own, a string time: not proven; a bracket in a string before the key: proven
    assert found == [b"-1.8446744073709552e+19", None, None, b"4", b"5"]

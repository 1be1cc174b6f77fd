"""The structural scanner (ingest.scan) and the lazy event sequence (ingest.events): element byte ranges
reproduce orjson.loads exactly, whatever the layout, the strings' contents and where blocks are cut."""
from __future__ import annotations

import json
from unittest import mock

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.ingest.events import ChunkError, Events, event_chunks, event_reads
from habitat_trace.ingest.reader import split_document
from habitat_trace.ingest.scan import escaped_quotes, scan

BLOCKS = [1, 2, 3, 5, 7, 16, 64, 1 << 24]
TRICKY = ['a "quoted" name', "ends in a backslash \\", "\\\\", '\\"', "[{,}]", '"}, {"', "],[", "ü ✓ 🚀",
          "tab\tnew\nline", "\\\\\\\"", ""]


def _events(raw: bytes, block: int = 1 << 24) -> list:
    layout = scan(raw, block)
    assert layout is not None
    return [orjson.loads(raw[s:e]) for s, e in zip(layout.starts.tolist(), layout.ends.tolist())]


def _doc(events: list, **meta: object) -> dict:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU, [0]"}], **meta, "traceEvents": events,
            "traceName": "x"}


def _layouts(doc: object) -> list[bytes]:
    """The same document as orjson writes it (compact) and as Kineto and json.dump write it (indented)."""
    return [orjson.dumps(doc), json.dumps(doc, indent=2).encode(), json.dumps(doc, ensure_ascii=False).encode(),
            b"\n  " + json.dumps(doc, indent=4).replace("\n", "\r\n").encode() + b"\n\n"]


EVENTS = [{"ph": "X", "name": s, "args": {"k": s, "nested": [{"a": [1, [2, {"b": s}]]}, s], s: {}}} for s in TRICKY]


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.slow
def test_tricky_strings_in_every_layout(block: int) -> None:
    for raw in _layouts(_doc(EVENTS)):
        assert _events(raw, block) == EVENTS


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.slow
def test_bare_array(block: int) -> None:
    for raw in _layouts(EVENTS):
        layout = scan(raw, block)
        assert layout is not None and orjson.loads(layout.meta_bytes(raw)) == []
        assert _events(raw, block) == EVENTS


def test_meta_is_the_document_without_events() -> None:
    doc = _doc(EVENTS, distributedInfo={"ranks": [0, 1], "traceEvents": "not the key"})
    for raw in _layouts(doc):
        layout = scan(raw)
        assert orjson.loads(layout.meta_bytes(raw)) == {**doc, "traceEvents": []}


def test_escaped_key_spelling() -> None:
    raw = b'{"a": [1, 2], "trace\\u0045vents": [{"ph": "X"}, 3], "b": {"c": ","}}'
    assert _events(raw) == [{"ph": "X"}, 3]


def test_empty_and_single_event_arrays() -> None:
    assert len(scan(b'{"traceEvents": [ \n ]}').starts) == 0
    assert len(scan(b"[]").starts) == 0
    assert _events(b'{"traceEvents":[{"ph":"i"}]}') == [{"ph": "i"}]


@pytest.mark.parametrize("raw", [
    b"", b"   ", b"42", b'"text"', b"{}", b'{"hello": 1}', b'{"traceEvents": {"ph": "X"}}',
    b'{"traceEvents": [1], "traceEvents": [2]}',  # duplicate key: the whole-document parse decides
    b'{"traceEvents": [1, 2]', b'{"traceEvents": [1, "2]}', b'{"traceEvents": [1]}}', b'[1] [2]',
    b'{"traceEvents": "[1, 2]"}', b'{"traceEvents": [1] 2}', b'{"trace\\xEvents": [1]}', b'{"a": 1 "b": [1]}',
])
def test_not_a_well_formed_trace_is_none(raw: bytes) -> None:
    assert scan(raw) is None or split_document(raw) is None


@pytest.mark.parametrize("raw", [
    b'{"traceEvents": [{"ph": "X"},, {"ph": "X"}]}', b'{"traceEvents": [{"ph": "X"}, ]}',
    b'{"traceEvents": [{"ph": "X", "ts": NaN}]}', b'{"traceEvents": [{"ph": "X"} {"ph": "X"}]}',
])
def test_malformed_events_are_refused_when_parsed(raw: bytes) -> None:
    split = split_document(raw)
    if split is not None:
        with pytest.raises(ChunkError):
            list(split[1])


@pytest.mark.parametrize("block", [1, 2, 3, 4])
def test_escape_runs_across_block_boundaries(block: int) -> None:
    raw = b'["a\\\\\\"b", "c\\\\", "\\\\\\\\\\"", "d"]'  # runs of 3, 2, 5 backslashes before quotes
    buf = np.frombuffer(raw, dtype=np.uint8)
    found = np.concatenate([escaped_quotes(buf, a, a + block) for a in range(0, len(raw), block)])
    assert found.tolist() == [i for i in range(len(raw)) if raw[i:i + 1] == b'"' and _odd_run(raw, i)]
    assert _events(raw, block) == json.loads(raw)


def _odd_run(raw: bytes, i: int) -> bool:
    n = 0
    while i - n - 1 >= 0 and raw[i - n - 1:i - n] == b"\\":
        n += 1
    return n % 2 == 1


JSON_TEXT = st.lists(st.sampled_from(list('"\\[]{},: \n\tabü✓') + ["\\\\", '\\"']), max_size=8).map("".join)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(JSON_TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(events=st.lists(JSON_VALUE, max_size=12), layout=st.integers(0, 3), bare=st.booleans(),
       block=st.sampled_from(BLOCKS))
@pytest.mark.slow
def test_scanner_ranges_reproduce_orjson(events: list, layout: int, bare: bool, block: int) -> None:
    raw = _layouts(events if bare else _doc(events))[layout]
    expected = orjson.loads(raw)
    assert _events(raw, block) == (expected if bare else expected["traceEvents"])


def test_events_sequence() -> None:
    raw = orjson.dumps(_doc(EVENTS))
    layout = scan(raw)
    ev = Events(raw, layout.starts, layout.ends, chunk_bytes=100)
    assert len(ev) == len(EVENTS) and list(ev) == EVENTS
    assert ev[0] == EVENTS[0] and ev[-1] == EVENTS[-1]
    assert ev[2:5] == EVENTS[2:5] and ev[::3] == EVENTS[::3] and ev[::-2] == EVENTS[::-2] and ev[5:2] == []
    with pytest.raises(IndexError):
        ev[len(EVENTS)]
    chunks = list(ev.chunks())
    assert len(chunks) > 1 and [e for _, c in chunks for e in c] == EVENTS
    assert [first for first, _ in chunks] == np.cumsum([0] + [len(c) for _, c in chunks[:-1]]).tolist()
    got = ev[0]
    got["name"] = "changed"  # nothing parsed is kept
    assert ev[0] == EVENTS[0]
    assert list(event_chunks(EVENTS)) == [(0, EVENTS)]


def test_read_in_parts_gives_the_chunks_and_each_part() -> None:
    """Events.read parses a chunk in parts (events.PART_BYTES) and takes ``each`` of every part in order: the chunks
    are chunks()'s, the parts cover each chunk's events in order, and the canonical check marks every event of an
    orjson dump in parts."""
    raw = orjson.dumps(_doc(EVENTS))
    layout = scan(raw)
    with mock.patch("habitat_trace.ingest.events.PART_BYTES", 60), \
            mock.patch("habitat_trace.ingest.events.KEEP_PARSED_BYTES", 0):  # a large document: checked, not kept
        ev = Events(raw, layout.starts, layout.ends, chunk_bytes=400)
        read = list(ev.read(list))
        assert [(lo, c) for lo, c, _ in read] == list(Events(raw, layout.starts, layout.ends, 400).chunks())
    assert any(len(parts) > 1 for _, _, parts in read)
    assert all([e for p in parts for e in p] == c for _, c, parts in read)
    marked = np.zeros(len(EVENTS), dtype=bool)
    for lo, hi in ev.canonical or []:
        marked[lo:hi] = True
    assert marked.all() and list(event_reads(EVENTS, list)) == [(0, EVENTS, [])]


SEED = orjson.dumps(_doc([{"ph": "X", "name": 'a"b', "args": {"x": [1, {"y": "]"}]}}, {"ph": "i", "s": "\\"}, 3]))


@given(edits=st.lists(st.tuples(st.integers(0, len(SEED)), st.sampled_from(list(b'"\\[]{},: 1a')), st.booleans()),
                      min_size=1, max_size=3))
def test_mutated_documents_never_misparse(edits: list) -> None:
    """Whatever the bytes, the split either agrees with orjson on the whole document or is refused
    (None, or ChunkError when the events are parsed): never a different result."""
    raw = bytearray(SEED)
    for at, byte, insert in edits:
        if insert:
            raw[at:at] = bytes([byte])
        elif at < len(raw):
            raw[at] = byte
    raw = bytes(raw)
    try:
        whole = orjson.loads(raw)
    except orjson.JSONDecodeError:
        whole = None
    split = split_document(raw)
    if split is not None:
        try:
            events = list(split[1])
        except ChunkError:
            return
        assert whole is not None
        assert events == (whole if isinstance(whole, list) else whole["traceEvents"])
        assert split[0] == ({} if isinstance(whole, list) else {k: v for k, v in whole.items() if k != "traceEvents"})
    elif isinstance(whole, dict) and isinstance(whole.get("traceEvents"), list) and whole["traceEvents"]:
        assert not any(isinstance(e, dict) and "ph" in e for e in whole["traceEvents"][:1000]) \
            or raw.count(b'"traceEvents"') != 1

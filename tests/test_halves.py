"""A large trace's tables from two processes (ingest/halves.py, issue 34): the forked child's half gives what one
process gives (tables, violations, canonical parts, the ROCm sniff, the written document), a child that dies or a
bad event in its half ends as a one-process read ends, and nothing is forked where it cannot help."""
from __future__ import annotations

import gzip
import json
import math
import os
import threading
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from habitat_trace import forking
from habitat_trace.emit import halves as emit_halves
from habitat_trace.emit import writer
from habitat_trace.errors import TraceFormatError
from habitat_trace.ingest import events as lazy
from habitat_trace.ingest import halves, load
from habitat_trace.ingest.assemble import Parts, assemble
from habitat_trace.ingest.events import ChunkError
from habitat_trace.ingest.fields import EventFields
from habitat_trace.ingest.reader import split_document
from habitat_trace.timeline.replay import replay
from tests.conftest import DATA, MLP_FIXTURE
from tests.emit_helpers import document_bytes, scaled

# collectives and NCCL kernels; a ROCm trace (the hip sniff); Perfetto-rule violations of the input; a CNN step
FIXTURES = [DATA / "a100_nccl_step5.json.gz", DATA / "amd_mi250_minitoy_rocm6.json.gz",
            DATA / "fuzz_kernel_without_cat.pt.trace.json.gz", DATA / "resnet50_cl_bn_step.pt.trace.json.gz"]
TABLES = ("gpu", "ops", "calls", "syncs", "gpu_annotations", "flows", "memory", "collectives")


def _events(raw: bytes) -> lazy.Events:
    split = split_document(raw)
    assert split is not None
    return split[1]


def _assert_same(a: Parts, b: Parts) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True, obj=name)
    assert (a.ts_ns == b.ts_ns).all() and (a.dur_ns == b.dur_ns).all()
    assert a.hip == b.hip and a.violations == b.violations


def _one_process(raw: bytes) -> tuple[Parts, list[tuple[int, int]]]:
    events, canonical = _events(raw), list[tuple[int, int]]()
    return assemble(events.read_span(EventFields.read, 0, len(events), canonical)), canonical


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_two_processes_build_what_one_builds(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = orjson.dumps(json.loads(gzip.decompress(path.read_bytes())))  # compact: canonical parts to find
    monkeypatch.setattr(lazy, "CHUNK_BYTES", len(raw) // 10)  # ten chunks to share out
    events, called = _events(raw), []
    assert len(events.bounds()) > 8
    two = halves._two_halves(events, lambda: called.append(events.canonical))
    one, canonical = _one_process(raw)
    _assert_same(two, one)
    assert events.canonical == canonical and called == [canonical]  # ``then`` once, after the last read


def test_a_child_that_dies_leaves_its_half_to_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lazy, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(halves, "_child", lambda *args: os._exit(3))  # killed before it answers
    raw = gzip.decompress(MLP_FIXTURE.read_bytes())
    events = _events(raw)
    _assert_same(halves._two_halves(events, lambda: None), _one_process(raw)[0])


def test_a_child_that_dies_after_taking_chunks_leaves_them_to_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lazy, "CHUNK_BYTES", 20_000)

    def dies(events: lazy.Events, bounds: list[int], meeting: Any, write: int, parent_alive: Any) -> None:
        meeting.take(False, parent_alive)  # two chunks from the back, never assembled or sent
        meeting.take(False, parent_alive)
        os._exit(3)

    monkeypatch.setattr(halves, "_child", dies)
    raw = gzip.decompress(MLP_FIXTURE.read_bytes())
    events = _events(raw)
    assert len(events.bounds()) > 4
    _assert_same(halves._two_halves(events, lambda: None), _one_process(raw)[0])


def _nan_in_second_half() -> bytes:
    doc = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
    last = next(e for e in reversed(doc["traceEvents"]) if e.get("ph") == "X")
    last["args"]["note"] = math.nan  # Python's json writes a bare NaN, which orjson refuses
    return json.dumps(doc, separators=(",", ":")).encode()


def test_a_bad_event_in_the_childs_half_is_the_chunk_error_of_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lazy, "CHUNK_BYTES", 20_000)
    events = _events(_nan_in_second_half())
    with pytest.raises(ChunkError, match="events "):
        halves._two_halves(events, lambda: None)


def _splitting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every plain trace splittable here; the list gets the events' count of each split."""
    monkeypatch.setattr(lazy, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(lazy, "KEEP_PARSED_BYTES", 1000)
    monkeypatch.setattr(forking, "SPLIT_BYTES", 1000)
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    monkeypatch.setattr(forking, "alone", lambda: True)  # an earlier test's thread may linger
    mids: list[int] = []
    two_halves = halves._two_halves

    def spy(events: lazy.Events, then: Any) -> Parts:
        mids.append(len(events))
        return two_halves(events, then)

    monkeypatch.setattr(halves, "_two_halves", spy)
    return mids


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_load_and_write_split_a_large_plain_file_into_the_same_document(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(orjson.dumps(json.loads(gzip.decompress((DATA / "emit_mlp_h100.pt.trace.json.gz").read_bytes()))))
    monkeypatch.setattr(lazy, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(lazy, "KEEP_PARSED_BYTES", 1000)
    monkeypatch.setattr(writer, "WRITE_CHUNK_BYTES", 20_000)
    alone = load(path)
    pred = scaled(alone, 0.5)
    expected = document_bytes(alone, replay(alone, pred), pred)  # one process: nothing splits below SPLIT_BYTES
    mids = _splitting(monkeypatch)
    writes: list[int] = []
    in_two = emit_halves._in_two

    def spy(units: Any, make: Any) -> Any:
        writes.append(len(units))
        return in_two(units, make)

    monkeypatch.setattr(emit_halves, "_in_two", spy)
    split = load(path)
    assert len(mids) == 1 and split.events.canonical == alone.events.canonical  # type: ignore[attr-defined]
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(split, name), getattr(alone, name), check_exact=True, obj=name)
    assert split.violations == alone.violations
    assert document_bytes(split, replay(split, pred), pred) == expected and len(writes) == 1


def test_a_bad_event_reads_as_the_one_process_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nan.pt.trace.json"
    path.write_bytes(_nan_in_second_half())
    alone = load(path)  # NaN: the whole-document parse takes it, as before
    mids = _splitting(monkeypatch)
    split = load(path)
    assert len(mids) == 1 and isinstance(split.events, list) and len(split.gpu) == len(alone.gpu)


def test_a_truncated_file_names_the_same_fix_split_or_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cut.pt.trace.json"
    raw = orjson.dumps(json.loads(gzip.decompress(MLP_FIXTURE.read_bytes())))
    path.write_bytes(raw[:len(raw) * 3 // 4])
    with pytest.raises(TraceFormatError) as alone:
        load(path)
    _splitting(monkeypatch)
    with pytest.raises(TraceFormatError) as split:
        load(path)
    assert str(split.value) == str(alone.value)


def test_nothing_is_forked_where_it_cannot_help(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = orjson.dumps(json.loads(gzip.decompress(MLP_FIXTURE.read_bytes())))
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    monkeypatch.setattr(forking, "alone", lambda: True)
    events = _events(raw)
    assert not halves.splittable(events)  # small: kept parsed, and below SPLIT_BYTES
    monkeypatch.setattr(lazy, "KEEP_PARSED_BYTES", 1000)
    monkeypatch.setattr(forking, "SPLIT_BYTES", 1000)
    assert halves.splittable(_events(raw))
    assert not halves.splittable(list(orjson.loads(raw)["traceEvents"]))  # a parsed list: nothing to split
    monkeypatch.setattr(forking, "cpus", lambda: 1)
    assert not halves.splittable(_events(raw))  # one CPU: the child would only take turns with the parent
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    monkeypatch.setattr(forking, "alone", lambda: False)
    assert not halves.splittable(_events(raw))


def test_a_process_with_another_thread_is_not_alone() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not forking.alone()  # a thread that a fork would copy mid-flight
    finally:
        stop.set()
        other.join()


def _forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forking, "SPLIT_BYTES", 0)
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    monkeypatch.setattr(forking, "alone", lambda: True)


def _no_child_left() -> bool:
    """No child process of this one, running or a zombie."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@settings(max_examples=25, deadline=None)
@given(parts=st.lists(st.sampled_from([b"", b"{}", b'{"a":1}', b'{"name":"x,y"}']), min_size=2, max_size=9))
def test_two_writers_join_the_parts_as_one(parts: list[bytes]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _forced(monkeypatch)
        got = b"".join(emit_halves.joined(parts, bytes, [len(p) + 1 for p in parts]))
    assert got == b",".join(p for p in parts if p) and _no_child_left()


def test_a_failing_child_writer_leaves_its_units_to_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    _forced(monkeypatch)
    parent = os.getpid()

    def make(unit: bytes) -> bytes:
        if os.getpid() != parent:
            raise OSError("the child's disk is full")
        return unit

    parts = [b"1", b"", b"2", b"3", b"4"]
    assert b"".join(emit_halves.joined(parts, make, [1] * 5)) == b"1,2,3,4" and _no_child_left()


def test_a_child_writer_that_dies_after_taking_units_leaves_them_to_the_parent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _forced(monkeypatch)

    def dies(units: Any, make: Any, spool: Any, meeting: Any, parent_alive: Any) -> None:
        meeting.take(False, parent_alive)  # two units from the back, never written
        meeting.take(False, parent_alive)
        os._exit(3)

    monkeypatch.setattr(emit_halves, "_child", dies)
    parts = [b"1", b"", b"2", b"3", b"4", b"5"]
    assert b"".join(emit_halves.joined(parts, bytes, [1] * 6)) == b"1,2,3,4,5" and _no_child_left()


def test_an_error_or_an_early_stop_kills_and_reaps_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    _forced(monkeypatch)

    def make(unit: bytes) -> bytes:
        if unit == b"bad":
            raise TraceFormatError("t.json: events #0-#9 hold a value that cannot be written back")
        return unit

    with pytest.raises(TraceFormatError, match="cannot be written back"):
        b"".join(emit_halves.joined([b"bad", b"2", b"3", b"4"], make, [1] * 4))
    assert _no_child_left()
    with pytest.raises(TraceFormatError, match="cannot be written back"):  # in the child's half: raised here
        b"".join(emit_halves.joined([b"1", b"2", b"3", b"bad"], make, [1] * 4))
    assert _no_child_left()
    stream = emit_halves.joined([b"1", b"2", b"3", b"4"], make, [1] * 4)
    assert next(stream) == b""  # the first separator
    stream.close()  # the consumer stops (its write failed): the child is not wanted
    assert _no_child_left()

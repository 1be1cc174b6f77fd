"""Chunked ingest and streaming output (issue 8, memory): load() builds the same tables from the events
kept as bytes, in many small chunks, as from the whole parsed list; the writer streams the same bytes;
what the scanner or orjson refuses goes through the whole-document parse, as before."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest

from habitat_trace.emit.writer import gzip_bytes
from habitat_trace.timeline.replay import replay
from habitat_trace.ingest import events as lazy
from habitat_trace.ingest import load
from habitat_trace.ingest.reader import read_document
from habitat_trace.ingest.tables import _shared
from tests.conftest import DATA, EXTERNAL, MLP_FIXTURE, TRACES, needs_shared
from tests.emit_helpers import document_bytes, scaled, tables_of, write_prediction

TABLES = ("gpu", "ops", "calls", "steps", "syncs", "gpu_annotations", "flows", "memory")
SHARED = [TRACES / "h100-sxm/gpt2_b8_s1024_amp.pt.trace.json.gz", TRACES / "h200-sxm/bert_b32_s128_amp.pt.trace.json.gz",
          EXTERNAL / "a100_cuda_event_sync.json.gz", EXTERNAL / "v100_resnet50_2021_tbplugin.pt.trace.json.gz"]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lazy, "CHUNK_BYTES", 20_000)  # dozens of chunks even for the small fixture


def _assert_same_trace(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    size = len(gzip.decompress(path.read_bytes()))
    monkeypatch.setattr(lazy, "CHUNK_BYTES", size // 30 + 1)  # about 30 chunks
    chunked = load(path)
    assert isinstance(chunked.events, lazy.Events) and len(chunked.events.bounds()) > 20
    whole = tables_of(path, read_document(path))
    assert chunked.meta == whole.meta and chunked.devices == whole.devices
    assert list(chunked.events) == whole.events
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(chunked, name), getattr(whole, name), check_exact=True, obj=name)
    assert (chunked.event_ts_ns == whole.event_ts_ns).all() and (chunked.event_dur_ns == whole.event_dur_ns).all()
    pred = scaled(whole, 0.5)
    assert document_bytes(chunked, replay(chunked, pred), pred) == document_bytes(whole, replay(whole, pred), pred)


@pytest.mark.slow
def test_chunks_build_the_tables_of_one_build(monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_same_trace(MLP_FIXTURE, monkeypatch)


@needs_shared
@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_chunks_build_the_tables_of_one_build_shared(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_same_trace(path, monkeypatch)


@pytest.mark.slow
def test_gzip_output_is_streamed_but_the_same(small_chunks: None, tmp_path: Path) -> None:
    trace = load(DATA / "emit_mlp_h100.pt.trace.json.gz")
    pred = scaled(trace, 2.0)
    tl = replay(trace, pred)
    out = write_prediction(trace, tl, pred, tmp_path / "out.pt.trace.json.gz", {})
    again = write_prediction(trace, tl, pred, tmp_path / "again.pt.trace.json.gz", {})
    raw, doc = out.read_bytes(), document_bytes(trace, tl, pred)
    assert gzip.decompress(raw) == doc
    assert raw == gzip_bytes(doc) == again.read_bytes()  # the pieces' cut does not reach the bytes


def _fixture_doc() -> dict:
    return json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))


def test_a_nan_goes_through_the_whole_document_parse(tmp_path: Path) -> None:
    doc = _fixture_doc()
    op = next(e for e in doc["traceEvents"][1000:] if e.get("ph") == "X")
    op["args"]["note"] = math.nan  # Python's json writes a bare NaN, which orjson refuses
    path = tmp_path / "nan.pt.trace.json"
    path.write_text(json.dumps(doc))
    trace = load(path)
    assert isinstance(trace.events, list)  # the fallback's parsed list
    assert math.isnan(trace.events[doc["traceEvents"].index(op)]["args"]["note"])
    assert len(trace.gpu) == len(load(MLP_FIXTURE).gpu)


@pytest.mark.slow
def test_a_bare_event_array_is_chunked(tmp_path: Path, small_chunks: None) -> None:
    path = tmp_path / "bare.json"
    path.write_bytes(orjson.dumps(_fixture_doc()["traceEvents"]))
    trace = load(path)
    assert isinstance(trace.events, lazy.Events) and trace.meta == {}
    assert len(trace.gpu) == len(load(MLP_FIXTURE).gpu)


@pytest.mark.slow
def test_hip_calls_in_a_later_chunk_mark_a_rocm_trace(tmp_path: Path, small_chunks: None) -> None:
    doc = _fixture_doc()
    runtime = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"]
    runtime[40]["name"] = "hipLaunchKernel"  # among the first 50 runtime calls, in a later chunk
    path = tmp_path / "hip.json"
    path.write_bytes(orjson.dumps(doc))
    assert load(path).vendor == "amd" and load(MLP_FIXTURE).vendor == "nvidia"


def test_shared_rows_keep_nan_apart_from_null() -> None:
    none_row, none_again, nan_row = ([1, None], ["float"]), ([1, None], ["float"]), ([1, math.nan], ["float"])
    out = _shared([none_row, none_again, nan_row, ([2], ["int"]), ([2], ["int"])])
    assert out[0] is none_row and out[1] is none_row and out[2] is nan_row  # the same JSON, not equal
    assert out[3] is out[4] and out[3][0] == [2]
    big = ([2**70], None)  # only the json-module fallback makes such ints; orjson cannot write them
    assert _shared([big, ([1], None)])[0] is big


def test_events_of_a_loaded_trace_are_read_only_copies() -> None:
    trace = load(MLP_FIXTURE)
    first = trace.events[0]
    first["ph"] = "changed"
    assert trace.events[0]["ph"] != "changed"
    assert np.array_equal(trace.event_ts_ns, load(MLP_FIXTURE).event_ts_ns)

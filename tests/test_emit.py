"""Writer: exact µs text from ns, identity round trip, target deviceProperties, atomic output, viewers."""
from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import new_violations
from habitat_trace.timeline.replay import replay
from habitat_trace.ingest.tables import event_times
from habitat_trace.emit.numbers import us_text
from habitat_trace.errors import OutputError
from habitat_trace.ingest import load
from habitat_trace.ingest.reader import read_document
from tests.emit_helpers import tables_of, write_prediction
from tests.conftest import DATA, EXTERNAL, TRACES, assert_perfetto_ok, needs_shared, viewer
from tests.emit_helpers import scaled, spec

FIXTURE = DATA / "emit_mlp_h100.pt.trace.json.gz"
H200 = spec("NVIDIA H200 SXM 141GB", 132, 139.8)
SHARED = ["h100-sxm/vgg16_b32_fp32", "h100-sxm/resnet50_b64_amp", "h100-sxm/gnmt_b64_fp32",
          "h200-sxm/gpt2_b8_s1024_amp_compiled"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("ns,text", [(4457346609398043, "4457346609398.043"), (0, "0.000"), (999, "0.999"),
                                     (-1500, "-1.500"), (-1, "-0.001"), (1000, "1.000")])
def test_us_text(ns: int, text: str) -> None:
    assert us_text(ns).decode() == text


def _roundtrip(path: Path, tmp_path: Path, factor: float = 1.0, suffix: str = ".pt.trace.json.gz"):
    trace = load(path)
    before = _sha(path)
    pred = scaled(trace, factor, H200)
    tl = replay(trace, pred)
    out = write_prediction(trace, tl, pred, tmp_path / f"out{suffix}", {"input": str(path)})
    assert _sha(path) == before  # input untouched
    return trace, tl, out


def _assert_identity(path: Path, tmp_path: Path) -> None:
    trace, _, out = _roundtrip(path, tmp_path)
    again = load(out)
    old_ts, old_dur = event_times(trace.events)
    new_ts, new_dur = event_times(again.events)
    assert (old_ts == new_ts).all() and (old_dur == new_dur).all()
    assert len(again.gpu) == len(trace.gpu)


def test_identity_fixture_reproduces_every_time(tmp_path: Path) -> None:
    _assert_identity(FIXTURE, tmp_path)


@needs_shared
@pytest.mark.parametrize("name", SHARED)
def test_identity_shared_reproduces_every_time(name: str, tmp_path: Path) -> None:
    _assert_identity(TRACES / f"{name}.pt.trace.json.gz", tmp_path)


@needs_shared
def test_identity_external_event_sync(tmp_path: Path) -> None:
    _assert_identity(EXTERNAL / "a100_cuda_event_sync.json.gz", tmp_path)


def _assert_output(path: Path, tmp_path: Path, factor: float) -> None:
    trace, tl, out = _roundtrip(path, tmp_path, factor)
    doc = read_document(out)
    assert len(doc["traceEvents"]) == len(trace.events)
    assert doc["deviceProperties"][0]["name"] == H200.name
    assert doc["deviceProperties"][0]["numSms"] == H200.sms
    assert doc["habitat_trace"]["target"] == H200.name
    assert doc["habitat_trace"]["methods"] == {"fallback": len(trace.gpu)}
    again = load(out)
    assert len(again.gpu) == len(trace.gpu) and (again.gpu["dur_ns"] > 0).all()
    assert (again.gpu["ts_ns"].to_numpy() == tl.gpu_start_ns).all()
    kernel = doc["traceEvents"][int(trace.gpu["event"].iat[0])]
    assert kernel["args"]["habitat_method"] == "fallback" and "habitat_origin_dur_us" in kernel["args"]
    errors, _ = new_violations(trace.events, doc["traceEvents"])
    assert errors == []


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_scaled_fixture_output(factor: float, tmp_path: Path) -> None:
    _assert_output(FIXTURE, tmp_path, factor)


@needs_shared
@pytest.mark.parametrize("name", SHARED)
@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_scaled_shared_output(name: str, factor: float, tmp_path: Path) -> None:
    _assert_output(TRACES / f"{name}.pt.trace.json.gz", tmp_path, factor)


@pytest.mark.parametrize("parsed", [False, True], ids=["events-from-bytes", "events-as-list"])
def test_does_not_mutate_events(parsed: bool, tmp_path: Path) -> None:
    # load() keeps the events as bytes (Events); from_document keeps the caller's list of dicts
    trace = tables_of(FIXTURE, read_document(FIXTURE)) if parsed else load(FIXTURE)
    snapshot = orjson.dumps(list(trace.events))
    _roundtrip(FIXTURE, tmp_path, 0.5)
    pred = scaled(trace, 0.5)
    write_prediction(trace, replay(trace, pred), pred, tmp_path / "x.json", {})
    assert orjson.dumps(list(trace.events)) == snapshot


def test_plain_and_gzip_outputs(tmp_path: Path) -> None:
    _, _, plain = _roundtrip(FIXTURE, tmp_path, 0.5, ".json")
    _, _, gz = _roundtrip(FIXTURE, tmp_path, 0.5, ".json.gz")
    assert plain.read_bytes()[:1] == b"{"
    assert gzip.decompress(gz.read_bytes()) == plain.read_bytes()


def test_refuses_input_as_output(tmp_path: Path) -> None:
    src = tmp_path / "t.pt.trace.json.gz"
    src.write_bytes(FIXTURE.read_bytes())
    trace = load(src)
    pred = scaled(trace)
    with pytest.raises(OutputError, match="is the input trace"):
        write_prediction(trace, replay(trace, pred), pred, src, {})
    assert src.read_bytes() == FIXTURE.read_bytes()


def test_missing_output_directory_is_one_line(tmp_path: Path) -> None:
    trace = load(FIXTURE)
    pred = scaled(trace)
    with pytest.raises(OutputError, match=r"nope: output directory does not exist") as exc:
        write_prediction(trace, replay(trace, pred), pred, tmp_path / "nope" / "o.json.gz", {})
    assert "\n" not in str(exc.value)


def test_no_partial_file_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = load(FIXTURE)
    pred = scaled(trace)
    tl = replay(trace, pred)

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OutputError, match="No space left"):
        write_prediction(trace, tl, pred, tmp_path / "o.json.gz", {})
    assert list(tmp_path.iterdir()) == []


GOLDEN_TRACE = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
    "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::step", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 25.0,
         "args": {"External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1005.0,
         "dur": 5.0, "args": {"correlation": 7, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1012.5, "dur": 4.0,
         "args": {"correlation": 7, "stream": 7, "device": 0, "External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 1011.0,
         "dur": 10.0, "args": {"correlation": 8}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 1005.0},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 1012.5, "bp": "e"},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1030.25, "args": {"Bytes": 4}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
    ],
}
# Kernel x0.5 -> 2 µs, starting 2.5 µs after its launch ends (1010.000 + 2.500); the device sync ends at
# max(1011 + 4.5 µs of CPU time, kernel end 1014.5 + 4.5 µs return latency) = 1019.0; everything after
# it on the thread moves 2 µs earlier (the op ends at 1023.000, the memory instant at 1028.250).
GOLDEN_EVENTS = [
    b'{"ph":"X","cat":"cpu_op","name":"aten::step","pid":1,"tid":1,"ts":1000.000,"dur":23.000,',
    b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1012.500,"dur":2.000,"args":{"correlation":7,'
    b'"stream":7,"device":0,"External id":1,"habitat_origin_dur_us":4.000,"habitat_method":"fallback",'
    b'"habitat_reason":"test: x0.5"}}',
    b'{"ph":"X","cat":"cuda_runtime","name":"cudaDeviceSynchronize","pid":1,"tid":1,"ts":1011.000,"dur":8.000,',
    b'{"ph":"f","cat":"ac2g","name":"ac2g","id":7,"pid":0,"tid":7,"ts":1012.5,"bp":"e"}',  # kernel did not move
    b'{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":1028.250,',
    b'{"ph":"s","cat":"ac2g","name":"ac2g","id":7,"pid":1,"tid":1,"ts":1005.0}',  # unchanged: kept as read
]


def test_golden_tiny_trace(tmp_path: Path) -> None:
    src = tmp_path / "tiny.json"
    src.write_bytes(orjson.dumps(GOLDEN_TRACE))
    trace = load(src)
    pred = scaled(trace, 0.5, H200)
    out = write_prediction(trace, replay(trace, pred), pred, tmp_path / "tiny.h200.json", {})
    text = out.read_bytes()
    for expected in GOLDEN_EVENTS:
        assert expected in text, expected


@pytest.mark.slow
def test_output_loads_in_hta(tmp_path: Path) -> None:
    viewer("hta", "HolisticTraceAnalysis")
    from hta.trace_analysis import TraceAnalysis

    _, _, out = _roundtrip(FIXTURE, tmp_path, 0.5)
    assert_perfetto_ok(out, FIXTURE)
    analysis = TraceAnalysis(trace_files={0: str(out)}, include_last_profiler_step=True)
    temporal = analysis.get_temporal_breakdown(visualize=False)
    assert len(temporal) == 1 and float(temporal["compute_time(us)"].iloc[0]) > 0
    kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    assert len(kernels[0]) > 0


def test_output_loads_in_tb_profiler(tmp_path: Path) -> None:
    viewer("torch_tb_profiler", "torch-tb-profiler")
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    _, _, out = _roundtrip(FIXTURE, tmp_path, 0.5)
    assert_perfetto_ok(out, FIXTURE)
    data = RunProfileData.parse("worker0", "span", str(out), str(tmp_path))
    profile = RunGenerator("worker0", "span", data).generate_run_profile()
    assert profile is not None and data.has_kernel


def test_output_has_ordinary_permissions(tmp_path: Path) -> None:
    _, _, out = _roundtrip(FIXTURE, tmp_path, 0.5)
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask

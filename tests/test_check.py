"""Checker of Perfetto's JSON-import rules, and the ``check`` command; optional real trace_processor run."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from habitat_trace.cli import app
from habitat_trace.ingest.rules import check_events
from tests.conftest import new_violations
from habitat_trace.timeline.replay import replay
from habitat_trace.ingest import load
from tests.conftest import DATA, TRACES, needs_shared
from tests.emit_helpers import scaled, write_prediction

FIXTURE = DATA / "emit_mlp_h100.pt.trace.json.gz"


def X(ts: float, dur: float, tid: int = 1, pid: int = 1) -> dict:
    return {"ph": "X", "name": "x", "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def _rules(events: list) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in check_events(events)]


def test_nested_and_equal_boundaries_pass() -> None:
    assert _rules([X(0, 10), X(0, 10), X(2, 3), X(5, 5), X(10, 1), X(10, 0)]) == []


def test_crossing_slices_violate_nesting() -> None:
    assert _rules([X(0, 10), X(5, 10)]) == [(1, "nesting")]
    assert _rules([X(0, 10), X(5, 10, tid=2)]) == []  # other track


def test_negative_dur_nonfinite_ts_and_id_range() -> None:
    events = [X(0, -1), {"ph": "X", "pid": 1, "tid": 1, "ts": "soon", "dur": 1}, X(0, 1, pid=2**32),
              X(0, 1, tid=-1), {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1}]
    assert _rules(events) == [(0, "negative-dur"), (1, "ts"), (2, "id-range"), (3, "id-range")]


def test_flows_bind_to_enclosing_slices() -> None:
    events = [X(0, 10), {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 5},
              {"ph": "f", "id": 1, "pid": 1, "tid": 1, "ts": 10, "bp": "e"},
              {"ph": "f", "id": 2, "pid": 1, "tid": 1, "ts": 11, "bp": "e"},
              {"ph": "s", "id": 3, "pid": 1, "tid": 9, "ts": 5},
              {"ph": "f", "id": 4, "pid": 1, "tid": 1, "ts": -3}]  # no bp: binds to the next slice
    assert _rules(events) == [(3, "flow-binding"), (4, "flow-binding")]


def test_compare_reports_inputs_own_violations_as_warnings() -> None:
    original = [X(0, 10), X(5, 10)]
    output = [X(0, 10), X(5, 10), X(20, 5), X(22, 5)]
    errors, warnings = new_violations(original, output)
    assert [(v.index, v.rule) for v in errors] == [(3, "nesting")]
    assert [(v.index, v.rule) for v in warnings] == [(1, "nesting")]


def _scaled_output(src: Path, tmp_path: Path, factor: float) -> Path:
    trace = load(src)
    pred = scaled(trace, factor)
    return write_prediction(trace, replay(trace, pred), pred, tmp_path / "out.pt.trace.json.gz", {"input": str(src)})


def test_check_command_ok_and_failure(tmp_path: Path) -> None:
    runner = CliRunner()
    out = _scaled_output(FIXTURE, tmp_path, 0.5)
    res = runner.invoke(app, ["check", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("ok: ") and "events" in res.stdout  # stderr notes the input is not beside it
    bad = tmp_path / "bad.json"
    # an output of ours (its header records its input's violations: none) that breaks nesting; a trace without the
    # header is the recording's, whose violations are not ours (issue 33, item 4)
    bad.write_bytes(orjson.dumps({"habitat_trace": {"input_violations": {}}, "traceEvents": [X(0, 10), X(5, 10)]}))
    res = runner.invoke(app, ["check", str(bad), "--format", "csv"])
    assert res.exit_code == 1 and res.stdout.splitlines()[:2] == ["event,rule,status,message", "1,nesting,error,"
                                                                  "\"[5.0, 15.0] starts inside event #0 [0.0, 10.0] "
                                                                  "on its track but ends after it\""]


ALL_SHARED = sorted(TRACES.glob("*/*.pt.trace.json.gz")) if TRACES.is_dir() else []


@needs_shared
@pytest.mark.parametrize("path", ALL_SHARED, ids=lambda p: f"{p.parent.name}/{p.name.split('.')[0]}")
def test_outputs_introduce_no_violations(path: Path, tmp_path: Path) -> None:
    trace = load(path)
    for factor in (0.4, 1.7):
        pred = scaled(trace, factor)
        out = write_prediction(trace, replay(trace, pred), pred, tmp_path / f"o{factor}.json", {})
        errors, _ = new_violations(trace.events, orjson.loads(out.read_bytes())["traceEvents"])
        assert errors == [], errors[:3]


TRACE_PROCESSOR = os.environ.get("PERFETTO_TRACE_PROCESSOR")


@pytest.mark.skipif(not TRACE_PROCESSOR, reason="set PERFETTO_TRACE_PROCESSOR to a trace_processor binary")
def test_real_trace_processor_imports_output(tmp_path: Path) -> None:
    out = _scaled_output(FIXTURE, tmp_path, 0.5)
    plain = tmp_path / "out.json"
    plain.write_bytes(orjson.dumps(orjson.loads(__import__("gzip").decompress(out.read_bytes()))))
    query = "select count(*) as n from slice; select name, value from stats where severity = 'error' and value > 0;"
    res = subprocess.run([TRACE_PROCESSOR, "--query-string", query, str(plain)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert "misplaced_end_event" not in res.stdout and "slice_drop" not in res.stdout, res.stdout

"""``compare`` (issue 7): the JSON/CSV contract, --price, the memory-fit rule, the PNG, unknown GPUs.

The CLI runs in a subprocess where stdout must hold only the JSON (the progress bar goes to stderr).
Traces with a recorded peak are built in tmp_path from the MLP fixture plus one Kineto ``[memory]`` instant.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from habitat_trace.cli import main
from habitat_trace import compare
from habitat_trace.analysis.compare import COLUMNS
from habitat_trace.ingest import load
from habitat_trace.analysis.memory import fits, peak_memory
from tests.conftest import MLP_FIXTURE, ROOT, TRACES, needs_shared

GIB = 1024**3
TYPES = {"gpu": str, "iteration_ms": float, "gpu_busy_ms": float, "speedup": float, "bound": str,
         "usd_per_hour": (float, type(None)), "price_source": (str, type(None)),
         "usd_per_1k_iterations": (float, type(None)), "peak_memory_gib": float, "memory_source": str,
         "fits_memory": bool, "method_share": dict}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "habitat_trace.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def _with_memory(tmp_path: Path, total_allocated: int, cat: str | None = "cpu_instant_event") -> Path:
    doc = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    event = {"ph": "i", "s": "t", "name": "[memory]", "pid": kernel["pid"], "tid": 1, "ts": kernel["ts"],
             "args": {"Total Reserved": total_allocated, "Total Allocated": total_allocated, "Bytes": 1024,
                      "Addr": 1, "Device Id": 0, "Device Type": 1}}
    if cat is not None:
        event["cat"] = cat
    doc["traceEvents"].append(event)
    path = tmp_path / "mlp_memory.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
def test_json_contract_exact_keys_types_origin_first() -> None:
    r = _cli("compare", str(MLP_FIXTURE), "--to", "L4,H200,A100", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)  # nothing but the JSON list on stdout
    assert [row["gpu"] for row in rows] == ["H100 SXM5 80GB", "L4", "H200 SXM 141GB", "A100 SXM4 80GB"]
    for row in rows:
        assert list(row) == list(COLUMNS)
        for key, kind in TYPES.items():
            assert isinstance(row[key], kind), (key, row[key])
        assert row["bound"] in ("gpu", "launch")
        assert row["memory_source"] == "estimate"  # the fixture has no [memory] events
        assert abs(sum(row["method_share"].values()) - 1.0) < 1e-9
    assert rows[0]["speedup"] == 1.0
    assert rows[0]["method_share"] == {"identity": 1.0}


def test_origin_gpu_listed_as_target_is_one_row_with_speedup_exactly_one() -> None:
    table = compare(MLP_FIXTURE, ["H100", "L4"])
    assert list(table["gpu"]) == ["H100 SXM5 80GB", "L4"]
    assert table["speedup"].iat[0] == 1.0


@pytest.mark.slow
def test_csv_has_header_and_one_line_per_gpu() -> None:
    r = _cli("compare", str(MLP_FIXTURE), "--to", "L4,T4", "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [row["gpu"] for row in rows] == ["H100 SXM5 80GB", "L4", "T4"]
    assert list(rows[0]) == list(COLUMNS)
    assert float(rows[0]["speedup"]) == 1.0
    assert json.loads(rows[1]["method_share"])


def test_price_override_and_cost_per_1k_iterations() -> None:
    table = compare(MLP_FIXTURE, ["L4", "RTX 3090"], prices={"l4": 0.5})
    l4 = table[table["gpu"] == "L4"].iloc[0]
    assert l4["usd_per_hour"] == 0.5 and l4["price_source"] == "--price"
    assert l4["usd_per_1k_iterations"] == pytest.approx(0.5 * l4["iteration_ms"] * 1000 / 3.6e6)
    origin = table.iloc[0]
    assert origin["price_source"].startswith("aws")
    unpriced = table[table["gpu"] == "RTX 3090"].iloc[0]  # the catalog has no price for it
    assert unpriced["usd_per_hour"] is None or unpriced["usd_per_hour"] != unpriced["usd_per_hour"]


def test_bad_price_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(MLP_FIXTURE), "--to", "L4", "--price", "L4:0.5"])
    assert exc.value.code == 2  # a usage error (issue 33, item 7)
    err = capsys.readouterr().err
    assert err.startswith("error: --price 'L4:0.5'") and err.count("\n") == 1


@pytest.mark.slow
def test_recorded_peak_over_24_gib_does_not_fit_an_l4(tmp_path: Path) -> None:
    path = _with_memory(tmp_path, 30 * GIB)
    r = _cli("compare", str(path), "--to", "L4,A100", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = {row["gpu"]: row for row in json.loads(r.stdout)}
    assert rows["L4"]["peak_memory_gib"] == 30.0 and rows["L4"]["memory_source"] == "trace"
    assert rows["L4"]["fits_memory"] is False
    assert rows["A100 SXM4 80GB"]["fits_memory"] is True


def test_memory_instants_without_category_are_read_too(tmp_path: Path) -> None:
    # regression: ingest bucketed [memory] instants only without "cat"; torch >= 1.13 writes
    # "cat": "cpu_instant_event", so every modern recorded peak was ignored
    for cat in (None, "cpu_instant_event"):
        assert peak_memory(load(_with_memory(tmp_path, 3 * GIB, cat))) == (3.0, "trace")


def test_margin_rule() -> None:
    assert fits(20.0, 24.0)  # 20 x 1.1 + 1 = 23 GiB needed
    assert not fits(21.0, 24.0)  # 21 x 1.1 + 1 = 24.1 GiB needed


@needs_shared
def test_estimate_on_a_shared_trace_without_memory_events() -> None:
    trace = load(TRACES / "h100-sxm" / "resnet50_b64_fp32.pt.trace.json.gz")
    assert len(trace.memory) == 0
    gib, source = peak_memory(trace)
    assert source == "estimate" and 1.0 < gib < 40.0  # ResNet-50 b64 fp32 trains in ~10-20 GiB


@pytest.mark.slow
def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "cmp.png"
    r = _cli("compare", str(MLP_FIXTURE), "--to", "L4,T4", "--plot", str(out))
    assert r.returncode == 0, r.stderr
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
    assert [p.name for p in tmp_path.iterdir()] == ["cmp.png"]  # no temporary file left


@pytest.mark.slow
def test_unknown_gpu_is_one_line_with_suggestions_exit_4() -> None:
    r = _cli("compare", str(MLP_FIXTURE), "--to", "L4,H1OO", "--format", "json")
    assert r.returncode == 4
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: unknown GPU 'H1OO'") and "close matches: H100" in r.stderr


@needs_shared
def test_shared_gpt2_table_rows() -> None:
    table = compare(TRACES / "h100-sxm" / "gpt2_b8_s1024_amp.pt.trace.json.gz", ["H200", "L4"])
    assert table["speedup"].iat[0] == 1.0
    assert (table["iteration_ms"] >= table["gpu_busy_ms"] - 1e-9).all()
    assert table["speedup"].iat[2] < 1.0  # an L4 is slower than an H100

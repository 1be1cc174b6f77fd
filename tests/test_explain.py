"""``explain`` (issue 7): ops and kernels whose time changes most, their facts and shares of the step;
``kernel_report`` explains exactly what ``predict`` returns."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from habitat_trace.analysis.explain import explain
from habitat_trace.ingest import load
from habitat_trace.pipeline import Options, Run
from habitat_trace.scale.engine import predict
from habitat_trace.analysis.kernels import REPORT_COLUMNS, kernel_report
from habitat_trace.scale.wave import combine
from habitat_trace.scale.specs import load_catalog
from tests.conftest import MLP_FIXTURE, ROOT, TRACES, needs_shared

ROW_KEYS = {"target", "rank", "name", "count_per_step", "origin_ms", "target_ms", "change_ms", "ratio", "waves_origin",
            "waves_target", "gamma", "bound", "method", "reason", "share"}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.mark.parametrize("target_name", ["L4", "H200"])
def test_kernel_report_matches_predict(catalog, target_name) -> None:
    trace = load(MLP_FIXTURE)
    origin, target = catalog.resolve("H100"), catalog.resolve(target_name)
    prediction = predict(trace, origin, target)
    report = kernel_report(trace, prediction)
    assert tuple(report.columns) == REPORT_COLUMNS and len(report) == len(trace.gpu)
    assert np.array_equal(report["dur_target_ns"].to_numpy(), prediction.dur_ns)
    assert list(report["method"]) == list(prediction.method)
    assert report["gamma"].between(0, 1).all() and report["flop_share"].between(0, 1).all()
    # the table explains a wave-law row completely: its prediction recomputes from the row's own columns
    wave_rows = (report["method"] == "wave").to_numpy()
    recomputed = combine(report["dur_origin_ns"].to_numpy(np.float64), report["gamma"].to_numpy(),
                         report["f_mem"].to_numpy(), report["f_comp"].to_numpy(), report["flop_share"].to_numpy())
    if target.architecture != origin.architecture:
        # across chips every kernel takes the sustained-rate law (scale/crossarch.py): γ and u are the shares of the
        # origin time it splits into DRAM and compute, f_mem and f_comp the bandwidth and SMs x clock ratios
        kernels = (report["kclass"] != "copy").to_numpy()
        assert (report["method"][kernels] == "sustained").all()
        assert (report["gamma"] + report["flop_share"]).between(0, 2).all()
        return
    assert wave_rows.any()
    assert np.allclose(np.maximum(np.rint(recomputed[wave_rows]), 1), report["dur_target_ns"][wave_rows], atol=1)
    # library rows: the same law, then never below the roofline floor
    lib = (report["method"] == "roofline-op").to_numpy()
    assert (report["dur_target_ns"].to_numpy()[lib] >= np.rint(recomputed[lib]) - 1).all()
    assert lib.any()


@needs_shared
def test_explain_shared_trace_ops_shares_sum_to_at_most_one(catalog) -> None:
    run = Run([load(TRACES / "h100-sxm" / "gpt2_b8_s1024_amp.pt.trace.json.gz")], Options(catalog))
    e = explain(run, [catalog.resolve("L4")], top=1000)
    ops, kernels = e.ops.to_dict(orient="records"), e.kernels.to_dict(orient="records")
    assert ops and kernels
    for rows in (ops, kernels):
        assert set(rows[0]) == ROW_KEYS
        assert 0 < sum(r["share"] for r in rows) <= 1.0 + 1e-9
        changes = [abs(r["change_ms"]) for r in rows]
        assert changes == sorted(changes, reverse=True)
    assert {r["bound"] for r in ops} <= {"memory", "compute", "latency"}  # H100 -> L4: the cross-chip law's three
    linear = next(r for r in ops if r["name"] == "aten::linear")
    assert linear["method"] == "sustained" and linear["target_ms"] > linear["origin_ms"]  # H100 -> L4: other chips
    [step] = e.steps.to_dict(orient="records")
    assert step["iteration_ms"] > step["origin_iteration_ms"]  # an L4 is slower
    assert step["origin_gpu_idle_ms"] == pytest.approx(step["origin_iteration_ms"] - step["origin_gpu_busy_ms"])


@pytest.mark.slow
def test_explain_json_cli_on_fixture() -> None:
    r = subprocess.run([sys.executable, "-m", "habitat_trace.cli", "explain", str(MLP_FIXTURE), "--to", "A100",
                        "--top", "3", "--format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    e = json.loads(r.stdout)
    [step] = e["steps"]
    assert step["origin"] == "H100 SXM5 80GB" and step["target"] == "A100 SXM4 80GB"
    assert 0 < len(e["ops"]) <= 3 and 0 < len(e["kernels"]) <= 3
    assert sum(r["share"] for r in e["ops"]) <= 1.0 + 1e-9


@pytest.mark.slow
def test_explain_table_and_unknown_gpu() -> None:
    r = subprocess.run([sys.executable, "-m", "habitat_trace.cli", "explain", str(MLP_FIXTURE), "--to", "L4"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "H100 SXM5 80GB -> L4" in r.stdout and "kernels whose time changes most" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "habitat_trace.cli", "explain", str(MLP_FIXTURE), "--to", "L44"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 4 and bad.stderr.startswith("error: unknown GPU 'L44'")


@pytest.mark.parametrize("method, gamma, compute, expected", [
    ("sustained", 0.05, 0.9, "compute"),    # a tensor-core GEMM at its pipe's rate
    ("sustained", 0.9, 0.05, "memory"),     # a copy at DRAM bandwidth
    ("sustained", 0.43, 0.0, "latency"),    # mobilenetv2's inference batch norm on an H100: 57% neither rate explains
    ("sustained", 0.0, 0.0, "latency"),
    ("wave", 0.43, 0.0, "compute"),         # within a chip the wave law has no latency part: γ decides
    ("wave", 0.5, 0.0, "memory"),
    ("collective-synthesized", 0.0, 0.0, "communication"),
])
def test_explain_bound_names_the_cross_chip_laws_largest_part(method, gamma, compute, expected):
    """Issue 25: across chips `explain` said 'compute' for kernels the law moves with SMs x clock (its latency part);
    the bound is now the largest share: compute, DRAM or the rest (latency)."""
    from habitat_trace.analysis.explain import bound

    assert bound(method, gamma, compute) == expected

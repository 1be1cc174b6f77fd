"""benchmarks/accuracy.py's held-out sets: "heldout" scores a hook-recorded trace as recorded, "heldout-plain"
strips the hook's measured un-profiled step, so the same traces also score the overhead model alone."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import accuracy
from habitat_trace import pipeline
from habitat_trace.ingest import schema as S
from tests.conftest import MLP_FIXTURE


def _hooked(tmp_path: Path) -> Path:
    doc = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
    doc[S.UNPROFILED_STEP_KEY] = [3_000_000, 3_100_000, 2_900_000]
    out = tmp_path / "t.pt.trace.json"
    out.write_text(json.dumps(doc))
    return out


def test_plain_set_strips_the_measured_step_and_the_hook_set_keeps_it(tmp_path) -> None:
    path = _hooked(tmp_path)
    assert pipeline.measured_step_ns(accuracy.load_for("heldout", path)) == 3_000_000
    assert pipeline.measured_step_ns(accuracy.load_for("heldout-plain", path)) is None


def test_heldout_folder_adds_both_sets_only_when_given(tmp_path) -> None:
    (tmp_path / "ground_truth.csv").write_text("workload\n")
    names = [n for n, _ in accuracy.datasets(tmp_path / "no-shared", tmp_path)]
    assert names[-2:] == ["heldout", "heldout-plain"]
    assert "heldout" not in [n for n, _ in accuracy.datasets(tmp_path / "no-shared")]


def test_repeatability_judges_the_hook_against_median_and_steady(tmp_path) -> None:
    path = _hooked(tmp_path)  # wait steps 3.0 ms (median); the MLP fixture's kernels take far less
    rows = "workload,trace,median_ms,steady_wall_ms,trace_kernel_ms\nmlp,t.pt.trace.json,2.0,2.5,0.3\n"
    (tmp_path / "ground_truth.csv").write_text(rows)
    assert path.exists()
    line = accuracy.repeatability(tmp_path)
    assert "1 traces" in line and "mean 22.2%" in line  # (3.0 - 2.5) / 2.25

"""benchmarks/scaleout_crosshost.py: a session's measured N-rank rows predicted from one-GPU traces of another
collection, joined to the session's own table (plumbing and arithmetic, not accuracy)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import scaleout_crosshost as X
from tests.conftest import MLP_FIXTURE


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture()
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A session "s" that measured the MLP on one GPU (10 ms) and with DDP on 2 ranks (12 ms), its own table, and a
    new one-GPU collection whose MLP step measured 8 ms, with the MLP fixture as its trace."""
    results, singles = tmp_path / "results", tmp_path / "new"
    _jsonl(results / "ground_truth" / "s" / "ground_truth.jsonl", [
        {"workload": "mlp", "mode": "single", "world": 1, "status": "ok", "slowest_rank_ms": 10.0, "device": "x"},
        {"workload": "mlp", "mode": "ddp", "world": 2, "status": "ok", "slowest_rank_ms": 12.0, "device": "x"}])
    pd.DataFrame([dict(workload="mlp", strategy="ddp", world=2, status="ok", scaleout_err=0.5, anchored_err=-0.25,
                       in_range=False)]).to_csv(results / "s.csv", index=False)
    _jsonl(singles / "ground_truth.jsonl", [{"workload": "mlp", "mode": "single", "world": 1, "status": "ok",
                                            "slowest_rank_ms": 8.0, "device": "H100", "torch": "2.11",
                                            "utc": "2026-12-06T03:47:00"}])
    (singles / "traces" / "mlp" / "single").mkdir(parents=True)
    shutil.copy(MLP_FIXTURE, singles / "traces" / "mlp" / "single" / "rank0.pt.trace.json.gz")
    return results, singles


def test_each_session_row_is_predicted_from_the_new_trace_beside_its_own(layout: tuple[Path, Path]) -> None:
    results, singles = layout
    df = X.evaluate(singles, ("s",), results)
    [row] = df.to_dict("records")
    assert row["measured_ms"] == 12.0 and row["measured_1gpu_ms"] == 10.0  # the session's measurements
    assert row["scaleout_err"] == pytest.approx(row["scaleout_ms"] / 12.0 - 1)
    assert row["anchored_err"] == pytest.approx(row["anchored_ms"] / 12.0 - 1)
    assert row["no_change_err"] == pytest.approx(10.0 / 12.0 - 1)
    assert row["no_change_new_err"] == pytest.approx(8.0 / 12.0 - 1)  # the new collection's one-GPU step
    assert (row["scaleout_err_session"], row["anchored_err_session"]) == (0.5, -0.25)  # the session's own table
    text = X.markdown(df, singles)
    assert "| ddp x2 | 1 |" in text and "(bias -33.3%)" in text and "steps of the 1 tables" in text

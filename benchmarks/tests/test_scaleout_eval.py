"""benchmarks/scaleout_eval.py's pooled lines over several sessions' tables: the reproducibility floor."""
from __future__ import annotations

import pandas as pd
import pytest

import scaleout_eval as E


def table(rows: list[tuple[str, float, float]]) -> pd.DataFrame:
    """(session, measured one-GPU step, measured 2-rank step) of one workload and strategy."""
    return pd.DataFrame([dict(workload="w", strategy="ddp", world=2, status="ok", measured_1gpu_ms=one,
                              measured_ms=n, session=s) for s, one, n in rows])


def test_the_floor_is_the_other_sessions_mean_added_time_on_the_rows_own_one_gpu_step() -> None:
    """Three sessions adding 10, 20 and 30 ms to their one-GPU step: each row is predicted with the other two's mean
    added time (25, 20, 15), so the errors are 15/110, 0/120 and 15/130."""
    df = table([("a", 100.0, 110.0), ("b", 100.0, 120.0), ("c", 100.0, 130.0)])
    [line] = E.reproducibility_lines(df)
    want = (15 / 110 + 0 + 15 / 130) / 3
    assert f"mean |error| {want:.1%} over 3 rows" in line


def test_identical_sessions_have_no_floor_and_a_lone_row_is_not_scored() -> None:
    df = table([("a", 50.0, 60.0), ("b", 50.0, 60.0)])
    assert "mean |error| 0.0% over 2 rows" in E.reproducibility_lines(df)[0]
    assert E.reproducibility_lines(table([("a", 50.0, 60.0)])) == []


@pytest.mark.parametrize("status", ["failed: x", "skipped: y"])
def test_rows_that_did_not_run_are_left_out(status: str) -> None:
    df = table([("a", 100.0, 110.0), ("b", 100.0, 120.0), ("c", 100.0, 500.0)])
    df.loc[2, "status"] = status
    assert "over 2 rows" in E.reproducibility_lines(df)[0]

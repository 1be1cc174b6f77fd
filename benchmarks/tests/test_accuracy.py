"""Done-when of the scaling-engine and timeline issues, as regression guards: scaling every shared
workload H100<->H200 and 132->64 SMs predicts per-step GPU busy time within a 5% mean error, and
launch-bound steps stay launch-bound."""
from __future__ import annotations

import math

import pytest

import accuracy
from tests.conftest import SHARED, needs_shared

MEAN_ERROR_BOUND_PCT = 5.0  # issue 3: mean busy-time error <= 5% (identity 8.5%, bandwidth ratio 27.9%)
WORST_ERROR_BOUND_PCT = 15.0  # no single workload may be far off while the mean looks good
SPAN_ERROR_BOUND_PCT = 8.0  # issue 4: same-host SM pairs within 8% (7.7% measured; CPU-speed noise between
# the separate recordings of launch-bound runs dominates what is left, see README)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return accuracy.run(SHARED, only_sets=("shared",), only_categories=("cross-GPU", "SM-scaled"))


@needs_shared
@pytest.mark.slow
def test_mean_busy_error_within_bound(rows: list[dict]) -> None:
    assert len(rows) == 34
    errors = [abs(r["busy_error_pct"]) for r in rows]
    assert sum(errors) / len(errors) <= MEAN_ERROR_BOUND_PCT
    assert max(errors) <= WORST_ERROR_BOUND_PCT


@needs_shared
@pytest.mark.slow
def test_prediction_beats_identity_on_every_category(rows: list[dict]) -> None:
    for cat in ("cross-GPU", "SM-scaled"):
        sel = [r for r in rows if r["category"] == cat]
        pred = sum(abs(r["busy_error_pct"]) for r in sel) / len(sel)
        ident = sum(abs(r["identity_error_pct"]) for r in sel) / len(sel)
        assert pred < ident / 2 and not math.isnan(pred)


@needs_shared
@pytest.mark.slow
def test_launch_bound_stays_launch_bound(rows: list[dict]) -> None:
    mlp = [r for r in rows if r["workload"].startswith("mlp_")]
    assert mlp and all(r["predicted_bound"] == r["measured_bound"] == "launch" for r in mlp)
    gpu_bound = [r for r in rows if r["measured_bound"] == "gpu" and r["origin_bound"] == "gpu"]
    assert all(r["predicted_bound"] == "gpu" for r in gpu_bound)


@needs_shared
@pytest.mark.slow
def test_same_host_span_error(rows: list[dict]) -> None:
    sel = [abs(r["span_error_pct"]) for r in rows if r["category"] == "SM-scaled"]
    assert len(sel) == 16 and sum(sel) / len(sel) <= SPAN_ERROR_BOUND_PCT

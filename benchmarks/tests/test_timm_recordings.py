"""benchmarks/crossarch/timm_recordings.py: two recordings' errors and how far apart their predictions are."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

import timm_recordings as R


def scored(rows: list[tuple[str, str, str, float, float, bool]]) -> pd.DataFrame:
    """(origin, model, gpu, predicted, published, other_program), the origin's measured step 10 or 11 ms."""
    return pd.DataFrame([dict(origin=o, model=m, gpu=g, predicted_ms=p, infer_step_time=t, other_program=x,
                              origin_measured_ms=10.0 if o == R.SHARED else 11.0, error=p / t - 1)
                         for o, m, g, p, t, x in rows])


def test_the_table_scores_each_recording_and_their_difference() -> None:
    m = scored([(R.SHARED, "a", "RTX 3090", 110.0, 100.0, False), (R.AGAIN, "a", "RTX 3090", 99.0, 100.0, False),
                (R.SHARED, "b", "RTX 3090", 50.0, 50.0, False), (R.AGAIN, "b", "RTX 3090", 55.0, 50.0, False),
                (R.SHARED, "c", "RTX 3090", 1.0, 100.0, True), (R.AGAIN, "c", "RTX 3090", 2.0, 100.0, True)])
    text = R.markdown(m, Path("again"))
    # errors: shared (10% + 0%) / 2, again (1% + 10%) / 2; predictions 99/110 - 1 = -10%, 55/50 - 1 = +10%;
    # the measured step 11/10 - 1 = 10%; model c (another program) left out
    assert "| RTX 3090 | 2 | 5.0% | 5.5% | 10.0% | 10.0% |" in text
    assert "a on RTX 3090 -10.0%" in text and "c on" not in text


def test_a_model_recorded_once_is_left_out_of_the_difference() -> None:
    m = scored([(R.SHARED, "a", "RTX 4090", 100.0, 100.0, False), (R.AGAIN, "a", "RTX 4090", 100.0, 100.0, False),
                (R.SHARED, "b", "RTX 4090", 100.0, 100.0, False)])
    assert "| RTX 4090 | 1 | 0.0% | 0.0% | 0.0% | 10.0% |" in R.markdown(m, Path("again"))

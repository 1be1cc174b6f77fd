"""benchmarks/crossarch/lambda_published.py (issue 32): Lambda's dev rows only, every dev GPU in the catalog, and the
drift-free error of a row computed as its docstring says."""
from __future__ import annotations


import pandas as pd
import pytest

from habitat_trace.scale.specs import load_catalog
from tests.conftest import SHARED, benchmark_module

LAMBDA = SHARED / "data" / "lambda-published" / "published-dev.csv"
needs_lambda = pytest.mark.skipif(not LAMBDA.is_file(), reason="../shared/data/lambda-published is absent")


def _bench():
    return benchmark_module("benchmarks/crossarch/lambda_published.py")


def test_every_named_gpu_is_catalogued() -> None:
    catalog = load_catalog()
    for name in _bench().GPUS.values():
        assert catalog.get(name) is not None, name


@needs_lambda
def test_published_rows_are_the_dev_split_against_their_generations_h100() -> None:
    bench = _bench()
    pub = bench.published(SHARED)
    assert bench.H100_ROW not in set(pub["gpu"])
    assert set(pub["precision"]) == {"amp", "tf32"} and set(pub["model"]) == set(bench.MODELS)
    b200 = pub[(pub["gpu"] == "B200 192GB") & (pub["model"] == "bert_large_squad") & (pub["precision"] == "amp")]
    assert b200["throughput"].iat[0] / b200["h100_throughput"].iat[0] == pytest.approx(523 / 310, abs=0.02)


@needs_lambda
def test_a_row_is_scored_per_sample_and_drift_free(monkeypatch) -> None:
    """A target predicted at 2 ms for a b=4 trace against our H100's 1 ms at b=8: 2 samples/ms over 8 samples/ms,
    0.25 of the H100's throughput; published 0.2 of it: +25% (predicted too fast)."""
    bench = _bench()
    pub = pd.DataFrame([{"dataset": "d", "gpu": "X", "precision": "amp", "model": "resnet50", "batch": 4.0,
                         "throughput": 20.0, "systems": 1, "h100_batch": 8.0, "h100_throughput": 100.0,
                         "catalog": "A100"}])
    runs = pd.DataFrame([{"model": "resnet50", "precision": "amp", "batch": 4, "trace": "t4", "measured_ms": 9.0},
                         {"model": "resnet50", "precision": "amp", "batch": 8, "trace": "t8", "measured_ms": 1.0}])
    a100 = load_catalog().resolve("A100").name
    monkeypatch.setattr(bench, "compare", lambda path, to: pd.DataFrame(
        {"gpu": ["H100 SXM5 80GB", a100], "iteration_ms": [9.0, 2.0], "gpu_busy_ms": [9.0, 2.0]}))
    d = bench.predict(pub, runs, busy=False)
    assert d["error"].iat[0] == pytest.approx(0.25)

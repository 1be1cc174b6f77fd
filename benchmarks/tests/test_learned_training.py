"""The shipped learned GEMM model against the NeuSight data it was trained on (benchmarks/learned/training): accurate
on the held-out shapes (train_gemm.held_out_shapes), and its trained-range constants (scale/learned) are the
training data's. Both skip without ../shared/data/neusight."""
from __future__ import annotations

import numpy as np
import pytest

import train_gemm as T
from habitat_trace.scale import learned
from habitat_trace.scale.learned import gemm_time_ratios
from habitat_trace.scale.learned import model as M
from habitat_trace.scale.specs import load_catalog
from tests.conftest import SHARED
from training import data as D

NEUSIGHT = SHARED / "data" / "neusight"
needs_neusight = pytest.mark.skipif(not NEUSIGHT.is_dir(), reason="../shared/data/neusight is absent")
CATALOG = load_catalog()
# median |error| on shapes the shipped model never saw, between the GPUs it was trained on: 11.3% measured
# 2026-11-22 with the TDP-clock baseline + 5-MLP ensemble; the bound leaves room for retraining noise
HELD_OUT_MEDIAN_ERROR = 0.15


@needs_neusight
def test_held_out_shapes_are_predicted_within_bound() -> None:
    wide = D.joined(D.load_neusight(NEUSIGHT))
    test = wide[T.held_out_shapes(wide)].iloc[::4]
    gpus = D.gpus(wide)
    p = D.pairs(test, gpus, gpus)
    pred = np.concatenate([
        q.t_origin_ms.to_numpy() * gemm_time_ratios(q.m, q.n, q.k, q.b, "fp32", CATALOG.resolve(o),
                                                    CATALOG.resolve(t), q.t_origin_ms.to_numpy() * 1e6)
        for (o, t), q in p.groupby(["origin", "target"])])
    truth = np.concatenate([q.t_target_ms.to_numpy() for _, q in p.groupby(["origin", "target"])])
    err = np.abs(pred - truth) / truth
    assert len(err) > 1000 and np.isfinite(err).all()
    assert np.median(err) <= HELD_OUT_MEDIAN_ERROR


@needs_neusight
def test_trained_range_constants_are_the_training_datas() -> None:
    long = D.load_neusight(NEUSIGHT)
    for dim, (lo, hi) in learned.TRAINED_DIMS.items():
        assert (long[dim].min(), long[dim].max()) == (lo, hi), dim
    assert int(long["t_ms"].min() * 1e6) == learned.MIN_T_ORIGIN_NS
    assert int(long["t_ms"].max() * 1e6) == learned.MAX_T_ORIGIN_NS
    wide = D.joined(long)
    corrections = []
    for o in D.gpus(wide):
        for t in D.gpus(wide):
            if o != t:
                t_o, t_t = wide[f"t_ms[{o}]"].to_numpy(), wide[f"t_ms[{t}]"].to_numpy()
                vo, vt = M.gpu_vector(CATALOG.resolve(o)), M.gpu_vector(CATALOG.resolve(t))
                corrections.append(np.log2(t_t / t_o) - M.baseline_log2_ratio(t_o, vo, vt))
    c = np.concatenate(corrections)
    lo, hi = M.CORRECTION_LOG2_RANGE
    assert lo <= c.min() < lo + 0.01 and hi - 0.01 < c.max() <= hi

"""Issue 25's training check, held out: our H100 traces of DLE-style AMP training steps predicted on A100 and V100
against NVIDIA DeepLearningExamples' published 1-GPU training throughput (benchmarks/crossarch/train_published.py,
benchmarks/results/train_published/README.md). The published rows' conversion runs everywhere; the prediction only
where the traces are (they are kept outside the repository)."""
from __future__ import annotations

import pytest

import train_published as BENCH
from habitat_trace.scale.specs import load_catalog

needs_traces = pytest.mark.skipif(not all((BENCH.TRACES / t).is_file() for t in BENCH.measured()["trace"]),
                                  reason=f"the H100 traces are not in {BENCH.TRACES}")
# DLE's figures as steps: batch / img_s (README tables at the commits in published.csv)
PUBLISHED_MS = {
    ("resnet50_b256", "A100 SXM4 80GB", "21.03"): 103.644,  # 256 / 2470 img/s
    ("resnet50_b256", "V100 SXM2 16GB", "21.03"): 213.333,  # 256 / 1200 img/s
    ("resnext101_32x4d_b128", "A100 SXM4 40GB", "20.06"): 140.907,  # 128 / 908.40 img/s
    ("resnext101_32x4d_b128", "V100 SXM2 32GB", "20.06"): 248.029,  # 128 / 516.07 img/s
}
# compare's iteration_ms from the 2026-12-06 H100 traces (recorded 15:04 UTC), when benchmarks/results/
# train_published.md was written; the 2026-11-25 traces gave 98.23, 183.28, 100.26, 106.88, 180.91 (the V100 SXM2 and
# A100 SXM4 40GB copy bandwidths were catalogued in between)
GOLDEN_MS = {
    ("resnet50_b256", "A100 SXM4 80GB"): 95.80, ("resnet50_b256", "V100 SXM2 16GB"): 174.16,
    ("resnext101_32x4d_b128", "A100 SXM4 80GB"): 97.00, ("resnext101_32x4d_b128", "A100 SXM4 40GB"): 100.36,
    ("resnext101_32x4d_b128", "V100 SXM2 32GB"): 172.08,
}
# Issue 25's bar was BENCH.BOUND (20%) per GPU on the pytorch-21.03 tables: 5.2%, 15.6%, 18.7% with the 2026-11-25
# recording. Re-recorded on 2026-12-06 they are 7.9%, 19.7%, 22.7% (the V100 32GB's row 20.2% before its measured copy
# bandwidth: the origin's ResNeXt101 step measured 4% faster, a step whose p10-p90 spans 55.9-71.1 ms), so the V100
# 32GB is above the bar, as train_published.md says. What this test pins is no worse than that, by 2 points.
PINNED_21_03 = {"A100 SXM4 80GB": 0.099, "V100 SXM2 16GB": 0.217, "V100 SXM2 32GB": 0.247}


def test_published_rows_convert_to_steps() -> None:
    pub = BENCH.published().set_index(["workload", "gpu", "software_set"])["published_ms"]
    assert len(pub) == 9
    for key, ms in PUBLISHED_MS.items():
        assert pub[key] == pytest.approx(ms, abs=1e-3), key


def test_published_rows_match_what_we_recorded() -> None:
    """Each row's batch is our recording's, and its GPU is a catalog entry under its own name (not an alias that
    would resolve to another card)."""
    pub, truth = BENCH.published(), BENCH.measured().set_index("workload")
    catalog = load_catalog()
    for r in pub.itertuples():
        assert truth.loc[r.workload, "batch"] == r.batch, r.workload
        assert catalog.resolve(r.gpu).name == r.gpu


@needs_traces
def test_held_out_training_steps() -> None:
    pub, truth = BENCH.published(), BENCH.measured()
    m = BENCH.score(BENCH.predict(BENCH.TRACES, truth, sorted(set(pub["gpu"]))), pub)
    assert m["predicted_ms"].notna().all()
    origin = m.drop_duplicates("workload")
    assert ((origin["origin_predicted_ms"] / origin["origin_measured_ms"] - 1).abs() <= 0.05).all()
    for (workload, gpu), golden in GOLDEN_MS.items():
        got = m.loc[(m["workload"] == workload) & (m["gpu"] == gpu), "predicted_ms"].iat[0]
        assert got == pytest.approx(golden, rel=0.01), f"{workload} on {gpu}: the law changed ({got:.2f} ms)"
    recent = m[m["software_set"] == "21.03"]  # the tables on DLE's READMEs today
    per_gpu = recent.groupby("gpu")["error"].apply(lambda e: e.abs().mean())
    assert set(per_gpu.index) == set(PINNED_21_03)
    assert all(per_gpu[g] <= bound for g, bound in PINNED_21_03.items()), per_gpu.to_dict()

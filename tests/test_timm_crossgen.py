"""Mixed precision across GPU generations (issue 25), on real traces: timm dev models recorded on an H100 and an H200
(tests/data/timm, README there) scaled to GeForce and workstation GPUs, pinned to timm's published step times.

Each case names the kernel class its model is dominated by; the prediction is the engine's (scale/crossarch.py) GPU
time ratio applied to the origin's measured un-profiled step, the quantity the law decides (compare adds the
replayed CPU side, nearly nothing for these GPU-bound batch-1024 steps). Two pins per case: the error against the
published figure stays within the bound the case was checked at, and the prediction itself stays within 1% of the
golden value recorded with it (a change to the law shows up here first, with the published number beside it).
"""
from __future__ import annotations

import numpy as np
import pytest

from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.scale import crossarch
from habitat_trace.scale.engine import predict
from habitat_trace.scale.prediction import SUSTAINED, WAVE
from habitat_trace.scale.specs import load_catalog

from tests.conftest import DATA, SHARED

CATALOG = load_catalog()
TIMM = DATA / "timm"
# our un-profiled step (ms) of each fixture, measured as timm's benchmark.py does (../shared/data/timm-published/h100
# /measured.csv; the H200 ones by benchmarks/collect/collect_timm.py, 2026-11-25)
MEASURED_MS = {
    ("h100", "resnet34"): 51.888, ("h200", "resnet34"): 47.273, ("h200_b2048", "resnet34"): 93.726,
    ("h100", "mobilenetv2_100"): 52.514, ("h200", "mobilenetv2_100"): 47.189,
    ("h100", "deit_small_patch16_224"): 54.513, ("h200", "deit_small_patch16_224"): 52.825,
    ("h100", "convnext_atto"): 65.094, ("h200", "convnext_atto"): 61.418,
    ("h100", "lcnet_100"): 24.348, ("h200", "lcnet_100"): 22.363,
}
# timm's published infer_step_time (ms; huggingface/pytorch-image-models results/, Apache-2.0), the dev rows in
# ../shared/data/timm-published/published: batch 1024 at 224 px (RTX PRO 6000 Max-Q: batch 2048)
PUBLISHED_MS = {
    ("resnet34", "RTX 3090"): 187.712, ("resnet34", "RTX 4090"): 123.118, ("resnet34", "RTX 5090"): 83.871,
    ("resnet34", "RTX PRO 6000 Blackwell Max-Q"): 169.355,
    ("mobilenetv2_100", "RTX 3090"): 118.65, ("mobilenetv2_100", "RTX 4090"): 94.728,
    ("mobilenetv2_100", "RTX 5090"): 61.17,
    ("deit_small_patch16_224", "RTX 3090"): 223.273, ("deit_small_patch16_224", "RTX 4090"): 124.757,
    ("deit_small_patch16_224", "RTX 5090"): 93.437,
    ("convnext_atto", "RTX 3090"): 112.582, ("convnext_atto", "RTX 4090"): 79.93, ("convnext_atto", "RTX 5090"): 61.083,
    ("lcnet_100", "RTX 3090"): 50.384, ("lcnet_100", "RTX 4090"): 39.108, ("lcnet_100", "RTX 5090"): 25.724,
}
# (kernel class that dominates the model, fixture, target, error bound the case was checked at, golden prediction ms)
CASES = [
    ("tensor-core convolutions, cuDNN layout transforms, BN", "h100", "resnet34", "RTX 4090", 0.05, 124.63),
    ("tensor-core convolutions at batch 2048 on a 300 W card", "h200_b2048", "resnet34",
     "RTX PRO 6000 Blackwell Max-Q", 0.10, 160.82),
    ("depthwise convolutions (ATen's own kernels) and BN", "h100", "mobilenetv2_100", "RTX 3090", 0.05, 119.36),
    ("GEMMs, flash attention, layer norm, GELU", "h100", "deit_small_patch16_224", "RTX 5090", 0.05, 94.98),
    ("7x7 depthwise convolutions, layer norm, MLP GEMMs", "h200", "convnext_atto", "RTX 5090", 0.10, 65.30),
    ("latency-bound small kernels (in-place hardswish)", "h100", "lcnet_100", "RTX 4090", 0.05, 39.61),
]


def predicted_ms(origin: str, model: str, target: str) -> float:
    trace = load(TIMM / f"{origin}_{model}@224.pt.trace.json.gz")
    src = CATALOG.resolve("H100" if origin == "h100" else "H200")
    pred = predict(trace, src, CATALOG.resolve(target))
    return MEASURED_MS[(origin, model)] * float(pred.dur_ns.sum()) / float(trace.gpu[S.DUR].sum())


@pytest.mark.parametrize("what, origin, model, target, bound, golden", CASES, ids=[c[0] for c in CASES])
def test_class_pinned_to_published(what: str, origin: str, model: str, target: str, bound: float,
                                   golden: float) -> None:
    got = predicted_ms(origin, model, target)
    published = PUBLISHED_MS[(model, target)]
    assert abs(got / published - 1) <= bound, f"{what}: {got:.2f} ms against timm's {published} ms"
    assert got == pytest.approx(golden, rel=0.01), f"{what}: the law changed ({got:.2f} ms, was {golden})"


def test_wave_law_was_off_by_about_2x() -> None:
    """What issue 25 fixed, pinned: the wave law with per-SM datasheet peaks predicted resnet34 on an RTX 4090 at
    about 1.5x timm's figure (every dev model too slow; 103% mean error), the cross-chip law within 5%."""
    saved = crossarch.applies
    try:
        crossarch.applies = lambda origin, target: False  # type: ignore[assignment]
        old = predicted_ms("h100", "resnet34", "RTX 4090")
    finally:
        crossarch.applies = saved  # type: ignore[assignment]
    assert old / PUBLISHED_MS[("resnet34", "RTX 4090")] > 1.4


MODELS = ("resnet34", "mobilenetv2_100", "deit_small_patch16_224", "convnext_atto", "lcnet_100")
TARGETS = ("RTX 4090", "RTX 5090", "RTX 3090", "RTX PRO 6000 Max-Q", "A100", "L4", "T4", "V100", "B200", "L40S")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.slow
def test_origin_invariance(model: str) -> None:
    """The same model recorded on an H100 and on an H200 (8% faster measured: 1.43x the bandwidth, same SMs) lands
    within 5% on every other-chip target (issue 25's done-when), though the two traces' kernel times differ."""
    for target in TARGETS:
        a, b = predicted_ms("h100", model, target), predicted_ms("h200", model, target)
        assert abs(b / a - 1) <= 0.05, f"{model} on {target}: {a:.2f} ms from the H100, {b:.2f} ms from the H200"


def test_same_chip_keeps_the_wave_law() -> None:
    trace = load(TIMM / "h100_resnet34@224.pt.trace.json.gz")
    pred = predict(trace, CATALOG.resolve("H100"), CATALOG.resolve("H200"))
    assert SUSTAINED not in set(pred.method) and WAVE in set(pred.method)


NEUSIGHT = SHARED / "data" / "neusight-e2e" / "bert_large-inf-512-8.pt.trace.json.gz"


@pytest.mark.shared(NEUSIGHT.parent)
def test_fp32_origin_invariance_on_neusight() -> None:
    """FP32 (NeuSight's BERT-Large inference): H100 and H200 traces of one workload predict the same busy time on the
    held-out A100s and L4 (predictions only; their labels are never read) and on the dev V100 and T4."""
    h100, h200 = load(NEUSIGHT), load(DATA / "h200_neusight_bert_large-inf-512-8.pt.trace.json.gz")
    for target in ("A100 PCIe 80GB", "A100 PCIe 40GB", "L4", "V100 PCIe 32GB", "T4"):
        tg = CATALOG.resolve(target)
        a = predict(h100, CATALOG.resolve("H100"), tg).dur_ns.sum()
        b = predict(h200, CATALOG.resolve("H200"), tg).dur_ns.sum()
        assert abs(b / a - 1) <= 0.05, target
    assert np.isfinite(a) and a > h100.gpu[S.DUR].sum()

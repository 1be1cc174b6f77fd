"""The across-architecture laws of scale/crossarch.py: FP32 GEMMs from each GPU's sustained rate, per-GPU DRAM
efficiency. Hypothesis properties (same architecture => the wave path unchanged; a faster target never slower;
durations > 0; one prediction per kernel), golden numbers, and the catalog's sources for the new keys."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from habitat_trace.ingest import schema as S
from habitat_trace.scale import crossarch, wave
from habitat_trace.scale.engine import predict
from habitat_trace.scale.prediction import SUSTAINED
from habitat_trace.scale.specs import load_catalog

CATALOG = load_catalog()
H100, H200 = CATALOG.resolve("H100 SXM5 80GB"), CATALOG.resolve("H200")
V100, T4 = CATALOG.resolve("V100 PCIe 32GB"), CATALOG.resolve("T4")
TARGETS = [CATALOG.resolve(n) for n in ("V100 PCIe 32GB", "T4", "P100 PCIe 16GB", "P4", "A100 PCIe 40GB",
                                        "A100 PCIe 80GB", "L4")]
M, N, K = 8192, 1024, 4096  # BERT-Large's FFN output projection at batch 16 x 512 tokens
FLOPS = 2.0 * M * N * K
OPS = pd.DataFrame({
    S.NAME: ["aten::mm", "aten::add"],
    S.INPUT_DIMS: [[[M, K], [K, N]], [[16, 512, 1024], [16, 512, 1024]]],
    S.INPUT_TYPES: [["float", "float"], ["float", "float"]],
    S.CONCRETE_INPUTS: [["", ""], ["", ""]],
})
SGEMM = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(Params)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"

kernel = st.fixed_dictionaries({
    "op": st.sampled_from([0, 0, 1, -1]),
    "blocks": st.integers(1, 100_000),
    "threads": st.sampled_from([64, 128, 256, 512]),
    "dur": st.integers(1, 5_000_000),
})


def _trace(kernels: list[dict]) -> SimpleNamespace:
    rows = [{S.NAME: SGEMM if k["op"] == 0 else ADD, S.CAT: S.CAT_KERNEL, S.TS: i * 10_000_000, S.DUR: k["dur"],
             S.GRID_X: k["blocks"], S.GRID_Y: 1, S.GRID_Z: 1, S.BLOCK_X: k["threads"], S.BLOCK_Y: 1, S.BLOCK_Z: 1,
             S.REGISTERS: 128, S.SHARED_MEM: 0, S.OP: k["op"], S.KCLASS: "gemm" if k["op"] == 0 else "elementwise",
             S.STEP: 0} for i, k in enumerate(kernels)]
    return SimpleNamespace(gpu=pd.DataFrame(rows), ops=OPS)


def _with(spec, **extra):
    return replace(spec, name=f"{spec.name} (what-if)", extra={**spec.extra, **extra})


def test_applies_across_architectures_only() -> None:
    assert not crossarch.applies(H100, H200)  # both Hopper: the validated wave path
    assert not crossarch.applies(V100, V100)
    assert crossarch.applies(H100, V100) and crossarch.applies(V100, H100)
    no_rate = replace(V100, extra={k: v for k, v in V100.extra.items() if k != crossarch.SUSTAINED_KEY})
    assert not crossarch.applies(H100, no_rate)  # no sourced rate: no law
    assert crossarch.dram_efficiencies(H100, H200) == (wave.ACHIEVABLE_BANDWIDTH_FRACTION,) * 2


@settings(max_examples=30, deadline=None)
@given(st.lists(kernel, min_size=1, max_size=30), st.sampled_from(TARGETS))
def test_same_architecture_is_unchanged_and_across_is_positive(ks: list[dict], target) -> None:
    trace = _trace(ks)
    within = predict(trace, H100, H200)
    assert SUSTAINED not in set(within.method)
    across = predict(trace, H100, target)
    assert len(across.dur_ns) == len(ks) and (across.dur_ns >= 1).all()
    gemm = trace.gpu[S.OP].to_numpy() == 0
    assert set(across.method[gemm]) <= {SUSTAINED} and (gemm.sum() == 0 or SUSTAINED in set(across.method))
    assert SUSTAINED not in set(across.method[~gemm])


def _faster(spec, what: str, factor: float):
    if what == "sustained":
        return _with(spec, **{crossarch.SUSTAINED_KEY: crossarch.sustained_tflops(spec) * factor})
    if what == "bandwidth":
        return replace(spec, name=f"{spec.name} bw", memory_bandwidth_gbs=spec.memory_bandwidth_gbs * factor)
    sms = int(round(spec.sms * factor))  # more SMs at the same per-SM rates (peaks and sustained rate follow)
    scale = sms / spec.sms
    return replace(_with(spec, **{crossarch.SUSTAINED_KEY: crossarch.sustained_tflops(spec) * scale}), sms=sms,
                   fp32_tflops=spec.fp32_tflops * scale, tensor_tflops={k: v * scale for k, v in spec.tensor_tflops.items()})


@settings(max_examples=30, deadline=None)
@given(st.lists(kernel, min_size=1, max_size=30), st.sampled_from(TARGETS),
       st.sampled_from(["sustained", "bandwidth", "sms"]), st.floats(1.05, 3.0), st.sampled_from(["ratio", "direct"]))
def test_more_throughput_bandwidth_or_sms_is_never_slower(ks, target, what, factor, mode) -> None:
    trace = _trace(ks)
    saved = crossarch.MODE
    try:
        crossarch.MODE = mode
        base = predict(trace, H100, target)
        better = predict(trace, H100, _faster(target, what, factor))
    finally:
        crossarch.MODE = saved
    assert (better.dur_ns <= base.dur_ns + 1).all()  # +1: rounding to whole ns


@given(st.integers(1, 64), st.integers(1, 20_000), st.integers(1, 20_000), st.integers(1, 200))
def test_wave_efficiency_is_a_fraction_and_whole_waves_are_free(b, m, n, sms) -> None:
    q = crossarch.wave_efficiency(b, m, n, sms)
    assert 0 < q <= 1
    tiles = b * -(-m // int(crossarch.TILE)) * -(-n // int(crossarch.TILE))
    if tiles % sms == 0:
        assert q == pytest.approx(1.0)


def test_ratio_mode_between_equal_specs_keeps_the_origin_time() -> None:
    twin = replace(V100, architecture="Volta twin")  # same numbers, another architecture name
    t = crossarch.gemm_ns(FLOPS, 4.0 * (M * K + K * N + M * N), 1, M, N, 1_234_567.0, V100, twin, crossarch.RATIO)
    assert t == pytest.approx(1_234_567.0)


def test_golden_v100_gemm_matches_neusight_per_op_label() -> None:
    """FP32 8192 x 1024 x 4096 on a V100 PCIe 32GB, direct mode: 64x64 tiles 128 x 16 = 2048 over 80 SMs = 25.6 waves,
    last-wave efficiency 25.6/26; 68.72 GFLOP / (12.45 TFLOP/s x 0.98462) = 5.6056 ms. NeuSight's per-op label for
    this op (perop/Tesla_V100-PCIE-32GB/bert_large-inf-512-16, bert.encoder.layer.0.output.dense, fw) is 5.8257 ms:
    -3.8%. The per-SM datasheet-peak ratio it replaces put BERT-Large on the V100 +21..+34% (neusight_e2e.md)."""
    t = crossarch.gemm_ns(FLOPS, 4.0 * (M * K + K * N + M * N), 1, M, N, 1.0, H100, V100, crossarch.DIRECT)
    assert float(t) == pytest.approx(FLOPS / (12.45e3 * (25.6 / 26)), rel=1e-9)
    assert float(t) / 1e6 == pytest.approx(5.6056, abs=1e-3)
    assert abs(float(t) / 5.8257e6 - 1) < 0.05


def test_engine_hook_h100_sgemm_to_v100() -> None:
    """Regression pin (issue 17): an H100 SGEMM at 48 TFLOP/s (what our H100 traces show) scaled to a V100 PCIe.
    The wave law's per-SM datasheet-peak ratio predicted 8.29 ms for it (+42% against NeuSight's per-op label
    5.83 ms); the sustained-rate law predicts 5.61 ms."""
    t_h100 = int(FLOPS / 48e3)  # ns at 48 TFLOP/s
    trace = _trace([{"op": 0, "blocks": 512, "threads": 256, "dur": t_h100}])
    pred = predict(trace, H100, V100)
    assert pred.method[0] == SUSTAINED
    assert pred.dur_ns[0] / 1e6 == pytest.approx(5.6056, abs=2e-3)


def test_catalog_sources_and_ranges() -> None:
    rates = dram = 0
    for name in CATALOG.names:
        spec = CATALOG.resolve(name)
        if crossarch.SUSTAINED_KEY in spec.extra:
            rates += 1
            assert str(spec.extra.get("fp32_gemm_sustained_source", "")).strip(), name
            assert 0.3 * spec.fp32_tflops <= crossarch.sustained_tflops(spec) <= spec.fp32_tflops, name
        if crossarch.DRAM_KEY in spec.extra:
            dram += 1
            assert str(spec.extra.get("dram_efficiency_source", "")).strip(), name
            assert 0.5 <= crossarch.dram_efficiency(spec) <= 1.0, name
    assert rates >= 8 and dram >= 7  # the dev GPUs, the held-out NVIDIA ones and the H100 origin

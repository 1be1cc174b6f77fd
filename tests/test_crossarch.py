"""The cross-chip law (scale/crossarch.py) and what it reads (scale/rates.py): when it applies, hypothesis properties
(same rates => identity; a faster pipe, more bandwidth, more SMs, a higher clock or a bigger L2 never slower;
durations > 0; one prediction per kernel), the catalog's sustained figures and fallbacks, and engine-level pins."""
from __future__ import annotations

import csv
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.scale import crossarch, rates
from habitat_trace.scale.engine import predict
from habitat_trace.scale.prediction import COPY, LEARNED, SUSTAINED
from habitat_trace.scale.specs import load_catalog
from tests.conftest import ROOT, SHARED, benchmark_module

CATALOG = load_catalog()
H100, H200 = CATALOG.resolve("H100 SXM5 80GB"), CATALOG.resolve("H200")
V100, T4, RTX4090 = CATALOG.resolve("V100 PCIe 32GB"), CATALOG.resolve("T4"), CATALOG.resolve("RTX 4090")
NVIDIA = [CATALOG.resolve(n) for n in CATALOG.names if CATALOG.resolve(n).vendor == "nvidia"]
PIPES = ("fp16", "bf16", "tf32", "fp32")


def test_applies_between_chips_of_one_vendor() -> None:
    assert not crossarch.applies(H100, H200)  # both GH100: the validated wave law
    assert not crossarch.applies(H100, CATALOG.resolve("H100 PCIe 80GB"))
    assert crossarch.applies(H100, RTX4090) and crossarch.applies(RTX4090, H100)
    assert crossarch.applies(CATALOG.resolve("A100"), CATALOG.resolve("L4"))
    assert crossarch.applies(V100, T4)
    assert not crossarch.applies(H100, CATALOG.resolve("MI300X"))  # across vendors: scale/vendor.py


# --- the law on its own: random kernels, random sustained rates ---------------------------------------------------
rate = st.floats(1.0, 2000.0)
gpu_rates = st.builds(
    lambda t16, t32, simt, dram, clock, sms, l2: rates.Rates({"fp16": t16, "bf16": t16, "tf32": t32}, simt, dram,
                                                             clock, sms, l2 * 2**20),
    rate, rate, st.floats(1.0, 120.0), st.floats(100.0, 8000.0), st.floats(500.0, 3000.0), st.integers(8, 200),
    st.floats(1.0, 256.0))
kernels = st.lists(st.fixed_dictionaries({
    "t": st.floats(1.0, 1e8), "flops": st.one_of(st.just(0.0), st.just(np.nan), st.floats(1.0, 1e13)),
    "bytes": st.one_of(st.just(np.nan), st.floats(1.0, 1e10)), "pipe": st.sampled_from(PIPES),
    "tiles": st.one_of(st.just(np.nan), st.floats(1.0, 1e5)), "library": st.booleans()}), min_size=1, max_size=20)


def _work(ks: list[dict]) -> crossarch.Work:
    col = {k: np.array([x[k] for x in ks]) for k in ks[0]}
    pipe = col["pipe"].astype(object)
    lib = col["library"]
    return crossarch.Work(t_origin=col["t"], flops=col["flops"], nbytes=col["bytes"], pipe=pipe, pipe_target=pipe,
                          width=np.ones(len(ks)), tiles=col["tiles"], memory_default=np.where(lib, 0.2, 0.8),
                          compute_default=np.where(lib, crossarch.COMPUTE_SHARE_WITHOUT_SHAPES, 0.0))


@given(kernels, gpu_rates)
def test_same_rates_is_identity(ks: list[dict], r: rates.Rates) -> None:
    """One chip runs the same kernels: every kernel keeps its time (a CUDA-core GEMM its whole efficiency)."""
    t, _ = crossarch.predict_ns(_work(ks), r, r, same_kernels=True)
    np.testing.assert_allclose(t, np.maximum([k["t"] for k in ks], 1.0), rtol=1e-9)


@given(st.floats(1e-4, 1.0), st.floats(1e-4, 1.0), st.booleans())
def test_carried_efficiency_keeps_the_order_and_moves_toward_the_typical(a: float, b: float, batched: bool) -> None:
    """E (e / E)^A with 0 < A <= 1: a more efficient origin GEMM is never predicted less efficient on the target,
    and the carried fraction lies between the origin's and the typical one (regression toward the mean)."""
    e = crossarch.carried_efficiency(np.array([a, b]), np.array([batched, batched]))
    typical = crossarch.TYPICAL_EFFICIENCY[batched]
    assert (e[0] - e[1]) * (a - b) >= -1e-12
    assert min(a, typical) - 1e-12 <= e[0] <= max(a, typical) + 1e-12


def test_a_gemm_chooses_its_kernel_on_another_chip() -> None:
    """A many-wave CUDA-core SGEMM at 0.3 of a V100's sustained rate (the origin library's poor kernel for it) is
    predicted on an H100 at E (0.3 / E)^A of the H100's, not at 0.3; one measured at 1.25x the V100's sustained rate
    as one at it, E (1 / E)^A, except for what the V100's clock cannot explain (its boost is only 1380 / 1344 MHz above
    its sustained clock): that excess is the op's cost overstating the kernel, and the H100 shares it; with
    same_kernels the origin's fraction carries whole."""
    ro, rt = rates.rates(V100), rates.rates(H100)
    flops, tiles = 1e12, 1e5  # 758 waves on 80 SMs: the first wave's share is ~0
    c_o = flops / (ro.simt_tflops * 1e3)
    ks = [{"t": c_o / e, "flops": flops, "bytes": 1e3, "pipe": "fp32", "tiles": tiles, "library": True}
          for e in (0.3, 1.25)]
    t, _ = crossarch.predict_ns(_work(ks), ro, rt)
    c_t = flops / (rt.simt_tflops * 1e3 * crossarch.wave_efficiency(np.array(tiles), rt.sms))
    single = crossarch.TYPICAL_EFFICIENCY[False] * (0.3 / crossarch.TYPICAL_EFFICIENCY[False]) ** (
        crossarch.EFFICIENCY_SLOPE[False])
    at_rate = crossarch.carried_efficiency(np.array([1.0]), None)[0]  # the origin at its rate, no further
    assert ro.clock_headroom == pytest.approx(1344 / 1380, rel=1e-3)
    assert c_t / t[0] == pytest.approx(single, rel=0.02)
    assert c_t / t[1] == pytest.approx(at_rate * 1.25 * ro.clock_headroom, rel=0.02)
    same, _ = crossarch.predict_ns(_work(ks), ro, rt, same_kernels=True)
    assert c_t / same[0] == pytest.approx(0.3, rel=0.02) and c_t / same[1] == pytest.approx(1.25, rel=0.02)


def test_a_gemm_above_its_rate_keeps_it_only_as_far_as_the_clock_explains() -> None:
    """A GEMM measured above its GPU's sustained rate ran at a clock its power limit does not hold, and the target's
    library runs its own kernel at the target's clock: on the T4 (900 MHz sustained, 1590 boost: headroom 0.57) an
    SGEMM at 1.5x its sustained rate is predicted on an H100 as one at that rate. On the H100, which holds its boost, a
    GEMM cannot beat its sustained rate by its clock, so what its shapes overstate carries over: the wgrad SGEMM of
    benchmarks/traces/h100-sxm/graphsage_n200k_e2m_fp32 (256 x 256 x 200,000: 16 output tiles of 64, which CUTLASS
    splits 66 ways over K, grid [2, 1, 66], 481 us) is faster on a B200 (more SMs, a higher FP32 rate), where it had
    come out 7.9x slower (issue 32)."""
    t4, h100, b200 = rates.rates(T4), rates.rates(H100), rates.rates(CATALOG.resolve("B200"))
    assert t4.clock_headroom == pytest.approx(900 / 1590) and h100.clock_headroom == 1.0
    flops, tiles = 1e12, 1e5
    at_rate = [{"t": flops / (t4.simt_tflops * 1e3) / e, "flops": flops, "bytes": 1e3, "pipe": "fp32",
                "tiles": tiles, "library": True} for e in (1.0, 1.5)]
    t, _ = crossarch.predict_ns(_work(at_rate), t4, h100)
    assert t[1] == pytest.approx(t[0], rel=1e-6)
    flops = 2.0 * 256 * 256 * 200_000
    split = _work([{"t": 481e3, "flops": flops, "bytes": 4.0 * (2 * 256 * 200_000 + 256 * 256), "pipe": "fp32",
                    "tiles": 16.0, "library": True}])
    t, _ = crossarch.predict_ns(split, h100, b200)
    assert t[0] < 481e3 * 0.95


def _kernel_ratio(name: str, target: str, pattern: str = "") -> float:
    """H100 -> ``target``: predicted over origin time, summed over the GPU events of a repository trace
    (benchmarks/traces/h100-sxm) whose name contains ``pattern`` (every event by default)."""
    trace = load(ROOT / f"benchmarks/traces/h100-sxm/{name}.pt.trace.json.gz")
    rows = trace.gpu[S.NAME].str.contains(pattern, regex=False).to_numpy()
    assert rows.sum() > 0
    p = predict(trace, H100, CATALOG.resolve(target))
    return float(p.dur_ns[rows].sum() / trace.gpu[S.DUR].to_numpy(float)[rows].sum())


def test_a_gnn_training_step_is_faster_on_a_b200() -> None:
    """Regression pin (issue 32): H100 -> B200 of the GraphSAGE FP32 training step in benchmarks/traces had come out
    1.3x slower (36.8 -> 47.4 ms: its split-K SGEMMs, test above); every pipe, the bandwidth and the SM count of the
    B200 are above the H100's."""
    assert _kernel_ratio("graphsage_n200k_e2m_fp32", "B200") < 0.9


def test_fused_attention_moves_with_the_tensor_rate_where_its_tail_is_in_series() -> None:
    """Regression pin (issue 32, Blackwell): cuDNN's fused attention of two Llama 2 70B-wide layers at seq 8192 runs at
    ~0.7 of the H100's BF16 rate; with its tiles (B x H x L / 128, cost.attention_tiles) it is a GEMM with shapes, so
    on a B200 (2.2x the rate, both tensor pipes in series) it moves with the rate, where the soft overlap had called it
    latency and moved it with SMs x clock (0.87x); to a GeForce card, whose mma.sync pipe overlaps the tail, it keeps
    the soft overlap (the timm dev split's choice): ~3x slower on an RTX 4090."""
    lora = "llama70b_lora_layers_d8192_l2_b1_s8192_bf16"
    assert _kernel_ratio(lora, "B200", "sdpa") < 0.5
    assert 2.5 < _kernel_ratio(lora, "RTX 4090", "sdpa") < 3.6


@pytest.mark.parametrize("target", ["V100 SXM2 16GB", "T4", "RTX 4090", "B200"])
def test_a_step_without_ops_moves_like_one_with_its_shapes(target: str) -> None:
    """Regression pin (issue 32, 2026-12-06): the kernels of a CUDA-graph replay have no ops, so every one takes its
    class's default shares. Scaled to make a streaming kernel DRAM-bound, they had put a CUDA-graph LLaMA step at 9.1x
    the H100 on a V100 and 34.9x on a T4, where an eager LLaMA step with its shapes is 4.6x and 12.2x; as parts of
    the P-norm they stay within 2x of it on old and new GPUs alike."""
    graph = _kernel_ratio("cudagraph_llama_d768_b8_s512_bf16", target)
    eager = _kernel_ratio("llama_d1024_l8_b4_s1024_bf16", target)
    assert 0.5 < graph / eager < 2.0


def test_an_adamw_steps_foreach_kernels_are_priced_by_their_own_bytes() -> None:
    """Regression pin (issue 32): the foreach AdamW step of two GPT-3-wide layers (4.4B bf16 parameters, 70 of the
    step's 150 ms on our H100) had unknown bytes (its self TensorList written back in place), so the class default
    shares priced it. Its bytes are now the op's TensorLists at the element size its kernels' names give (bf16: 2
    bytes), which put it at ~0.8 of the H100's bandwidth: read by the law as mostly latency, as kernels at that share
    behave from an H100 to an H200 (1.43x the bandwidth, ~1.1x faster: benchmarks/results/streaming_h100_h200.md),
    it moves to a B200 between its bandwidth ratio (0.46x) and its SMs x clock (0.9x)."""
    trace = load(ROOT / "benchmarks/traces/h100-sxm/gpt3_layers_d12288_l2_b1_s2048_bf16.pt.trace.json.gz")
    p = predict(trace, H100, CATALOG.resolve("B200"))
    rows = trace.gpu[S.NAME].str.contains("multi_tensor_apply", regex=False).to_numpy()
    assert not any("bytes unknown" in str(r) for r in p.reason[rows & (trace.gpu[S.DUR].to_numpy() > 100_000)])
    assert p.facts is not None and 0.6 < float(np.median(p.facts.gamma[rows])) < 0.95
    ratio = _kernel_ratio("gpt3_layers_d12288_l2_b1_s2048_bf16", "B200", "multi_tensor_apply")
    assert 3000 / 6560 < ratio < 0.95


@pytest.mark.shared(SHARED / "data" / "neusight")
def test_the_kernel_choice_constants_are_the_measured_ones() -> None:
    """TYPICAL_EFFICIENCY and EFFICIENCY_SLOPE are what benchmarks/crossarch/gemm_efficiency.py measures on
    NeuSight's five GPUs: recomputed here, so a change of the law's split that moves them fails until they follow."""
    mod = benchmark_module("benchmarks/crossarch/gemm_efficiency.py")
    typical, slope = mod.constants(mod.efficiencies(mod.D.load_neusight(SHARED / "data" / "neusight")))
    for kind in (False, True):
        assert typical[kind] == pytest.approx(crossarch.TYPICAL_EFFICIENCY[kind], abs=0.0015)
        assert slope[kind] == pytest.approx(crossarch.EFFICIENCY_SLOPE[kind], abs=0.0015)


def _faster(r: rates.Rates, what: str, k: float) -> rates.Rates:
    if what == "tensor":
        return replace(r, tensor_tflops={d: v * k for d, v in r.tensor_tflops.items()})
    if what == "simt":
        return replace(r, simt_tflops=r.simt_tflops * k)
    if what == "dram":
        return replace(r, dram_gbs=r.dram_gbs * k)
    if what == "clock":
        return replace(r, clock_mhz=r.clock_mhz * k)
    if what == "l2":
        return replace(r, l2_bytes=r.l2_bytes * k)
    # more SMs: a GPU with more SMs at the same clock has proportionally more sustained math (what-if entries scale so)
    sms = int(np.ceil(r.sms * k))
    return replace(r, sms=sms, simt_tflops=r.simt_tflops * sms / r.sms,
                   tensor_tflops={d: v * sms / r.sms for d, v in r.tensor_tflops.items()})


@given(kernels, gpu_rates, gpu_rates, st.sampled_from(["tensor", "simt", "dram", "clock", "l2", "sms"]),
       st.floats(1.0, 8.0))
def test_a_faster_target_is_never_slower(ks: list[dict], ro: rates.Rates, rt: rates.Rates, what: str, k: float) -> None:
    w = _work(ks)
    slow, _ = crossarch.predict_ns(w, ro, rt)
    fast, _ = crossarch.predict_ns(w, ro, _faster(rt, what, k))
    assert np.all(fast <= slow * (1 + 1e-9) + 1e-6), what


@given(kernels, gpu_rates, gpu_rates)
@pytest.mark.slow
def test_durations_positive_and_split_consistent(ks: list[dict], ro: rates.Rates, rt: rates.Rates) -> None:
    t, parts = crossarch.predict_ns(_work(ks), ro, rt)
    assert t.shape == (len(ks),) and np.all(np.isfinite(t)) and np.all(t > 0)
    # the origin's split reproduces its measured time (the law's P-norm of the three parts; latency added to compute
    # for GEMMs with recorded shapes)
    t_o = np.maximum([k["t"] for k in ks], 1.0)
    np.testing.assert_allclose(parts.total(), t_o, rtol=1e-6)


def test_latency_work_scales_with_sms_times_clock() -> None:
    """A kernel that moves nothing and computes nothing (pure latency/issue) keeps S x f: an RTX 4090 (128 SMs at a
    sourced 2820 MHz) runs it 0.67x as long as an H100 (132 at 1830 MHz, the clock its tensor peaks are quoted at:
    issue 32)."""
    w = _work([{"t": 1e6, "flops": 0.0, "bytes": 0.0, "pipe": "fp16", "tiles": np.nan, "library": False}])
    t, _ = crossarch.predict_ns(w, rates.rates(H100), rates.rates(RTX4090))
    assert t[0] / 1e6 == pytest.approx(132 * 1830 / (128 * 2820), rel=1e-9)


def test_cuda_core_work_keeps_the_boost_clock_tensor_work_the_tensor_clock() -> None:
    """The H100's FP32 peak is quoted at its 1980 MHz boost clock, its tensor peaks at 1830 MHz (gpus.toml
    tensor_clock_mhz_implied): latency work of a CUDA-core kernel moves with 132 x 1980, of a tensor kernel with
    132 x 1830 (issue 32); a GPU without a lower tensor clock (RTX 4090) runs both at its one clock."""
    ks = [{"t": 1e6, "flops": 0.0, "bytes": 0.0, "pipe": p, "tiles": np.nan, "library": False} for p in ("fp32", "fp16")]
    t, _ = crossarch.predict_ns(_work(ks), rates.rates(H100), rates.rates(RTX4090))
    assert t / 1e6 == pytest.approx([132 * 1980 / (128 * 2820), 132 * 1830 / (128 * 2820)], rel=1e-9)


def test_the_h100_holds_its_boost_clock_in_training_and_the_tensor_clock_bounds_gemm_heavy_steps() -> None:
    """Pins the measurements the rule above stands on (docs/method.md, the power limit; clock_under_load_h100.csv):
    the training steps with memory-bound work between their GEMMs (ResNet-50, BERT-large, ViT-B/16, GPT-2 medium) and
    the ResNet-50 inference step ran at a median SM clock within 2% of the H100's 1980 MHz boost, while the steps made
    of large GEMMs, timm's ViT-B/16 inference at batch 1024 and the two MLPerf-width LLM training steps (GPT-3
    175B-wide layers, Llama 2 70B-wide LoRA at seq 8192), were held by the 700 W limit below the 1830 MHz the rule gives
    tensor kernels, and the back-to-back tensor matmuls below 1500 MHz."""
    rows = {r["phase"]: r for r in csv.DictReader((ROOT / "benchmarks/results/clock_under_load_h100.csv").open())}
    mhz = {p: float(r["sm_mhz_median"]) for p, r in rows.items()}
    steps = [p for p in rows if p.startswith(("resnet50", "bert_large", "gpt2", "vit_base_train"))]
    assert len(steps) >= 7
    for p in steps:
        assert mhz[p] >= 0.98 * H100.boost_clock_mhz, p
    tensor_clock = rates.rates(H100).tensor_clock_mhz
    assert tensor_clock is not None and tensor_clock < H100.boost_clock_mhz
    for p in ("vit_base_infer_amp", "gpt3_layers_train_bf16", "llama70b_lora_train_bf16"):
        assert mhz[p] < tensor_clock and rows[p]["reasons"] == "0x0000000000000004", p  # the power cap, nothing else
    for p in ("bf16", "fp16", "tf32"):
        assert mhz[p] < 1500, p


def test_l2_holds_a_small_working_set_not_a_large_one() -> None:
    r = rates.rates(RTX4090)  # 72 MiB
    resident = crossarch.l2_resident(np.array([1e6, 36 * 2**20, 1e9, np.nan]), r)
    assert resident[0] > 0.99 and resident[1] == pytest.approx(0.5) and resident[2] < 0.01 and resident[3] == 0


def test_a_gemm_keeps_its_last_wave_quantization() -> None:
    assert crossarch.wave_efficiency(np.array([132.0, 133.0, np.nan]), 132).tolist() == pytest.approx([1, 133 / 264, 1])
    assert crossarch.gemm_tiles(1, 200, 300, np.array(True)) == 2 * 3  # 128-wide tensor-core tiles
    assert crossarch.gemm_tiles(1, 200, 300, np.array(False)) == 4 * 5  # 64-wide SIMT tiles


# --- what each GPU sustains ---------------------------------------------------------------------------------------
def test_every_sustained_figure_is_sourced_and_below_a_bound() -> None:
    for spec in NVIDIA:
        e = spec.extra
        for dtype in rates.TENSOR_DTYPES:
            if f"tensor_sustained_tflops_{dtype}" in e:
                assert str(e.get("tensor_sustained_source", "")).strip(), spec.name
        if "memory_bandwidth_achievable_gbs" in e:
            assert str(e.get("memory_bandwidth_achievable_source", "")).strip(), spec.name
            assert e["memory_bandwidth_achievable_gbs"] <= spec.memory_bandwidth_gbs, spec.name
        if "sm_clock_sustained_mhz" in e:
            assert str(e.get("sm_clock_sustained_source", "")).strip(), spec.name
        r = rates.rates(spec)
        assert 0.3 * spec.fp32_tflops <= r.simt_tflops <= 1.2 * spec.fp32_tflops, spec.name
        assert 0.5 * spec.memory_bandwidth_gbs <= r.dram_gbs <= spec.memory_bandwidth_gbs, spec.name


def _median_ratio(pairs: list[tuple[float, float]]) -> float:
    return float(np.median([a / b for a, b in pairs]))


def test_fallback_fractions_are_the_catalog_medians() -> None:
    """The fallbacks of rates.py are medians over the GPUs that have a sourced figure; recomputed here, so adding or
    correcting a sourced figure that moves a median fails this test until the constant follows it."""
    tensor, geforce, simt, dram = [], [], [], []
    by_issue: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for spec in NVIDIA:
        if spec.base or "derived" in str(spec.extra.get("tensor_sustained_source", "")):
            continue
        for d in rates.TENSOR_DTYPES:
            v = spec.extra.get(f"tensor_sustained_tflops_{d}")
            if v and d in spec.tensor_tflops:
                (geforce if rates.is_geforce(spec) else tensor).append((v, spec.tensor_tflops[d]))
        if spec.extra.get("fp32_gemm_sustained_tflops"):
            simt.append((spec.extra["fp32_gemm_sustained_tflops"], spec.fp32_tflops))
            by_issue["fp32" in rates.serial_pipes(spec)].append(simt[-1])
        bw = spec.extra.get("memory_bandwidth_achievable_gbs")
        eff = spec.extra.get("dram_efficiency")
        source = spec.extra.get("memory_bandwidth_achievable_source", spec.extra.get("dram_efficiency_source", ""))
        if (bw or eff) and not str(source).startswith("as "):  # a sibling's figure ("as <GPU>"): its run counts once
            dram.append((bw, spec.memory_bandwidth_gbs) if bw else (eff, 1.0))
    assert _median_ratio(tensor) == pytest.approx(rates.TENSOR_SUSTAINED_FRACTION, abs=0.006)
    assert _median_ratio(geforce) == pytest.approx(rates.GEFORCE_TENSOR_SUSTAINED_FRACTION, abs=0.006)
    assert _median_ratio(simt) == pytest.approx(rates.FP32_GEMM_SUSTAINED_FRACTION, abs=0.006)
    assert _median_ratio(by_issue[True]) == pytest.approx(rates.SERIAL_FP32_GEMM_FRACTION, abs=0.006)
    assert _median_ratio(by_issue[False]) == pytest.approx(rates.PAIRED_FP32_GEMM_FRACTION, abs=0.006)
    assert _median_ratio(dram) == pytest.approx(rates.DRAM_EFFICIENCY, abs=0.006)


def test_fallbacks_are_named() -> None:
    assert rates.rates(H100).fallbacks == ()  # its clock under load is measured (clock_under_load_h100.csv)
    assert rates.rates(H200).fallbacks == ("tensor_sustained_tflops_tf32", "sm_clock_sustained_mhz")
    bare = replace(RTX4090, extra={k: v for k, v in RTX4090.extra.items() if "sustained" not in k})
    r = rates.rates(bare)
    assert "tensor_sustained_tflops_fp16" in r.fallbacks and "fp32_gemm_sustained_tflops" in r.fallbacks
    assert r.tensor_tflops["fp16"] == pytest.approx(rates.GEFORCE_TENSOR_SUSTAINED_FRACTION * 165.2)


def test_what_if_entries_scale_their_sustained_figures(tmp_path) -> None:
    f = tmp_path / "w.toml"
    f.write_text('[gpus."H100 at 66 SMs"]\nbase = "H100 SXM5 80GB"\nsms = 66\n')
    half = load_catalog(f).resolve("H100 at 66 SMs")
    assert half.extra["tensor_sustained_tflops_bf16"] == pytest.approx(H100.extra["tensor_sustained_tflops_bf16"] / 2)
    assert half.extra["memory_bandwidth_achievable_gbs"] == H100.extra["memory_bandwidth_achievable_gbs"]


# --- through the engine -------------------------------------------------------------------------------------------
M, N, K = 8192, 1024, 4096
OPS = pd.DataFrame({S.NAME: ["aten::mm", "aten::add"],
                    S.INPUT_DIMS: [[[M, K], [K, N]], [[16, 512, 1024], [16, 512, 1024]]],
                    S.INPUT_TYPES: [["c10::Half", "c10::Half"], ["c10::Half", "c10::Half"]],
                    S.CONCRETE_INPUTS: [["", ""], ["", ""]]})
HGEMM = "nvjet_sm90_hsh_128x256_64x4_2x1_v_bz_coopA_NNT"
ADD = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::Half>>"


def _trace(durs: list[int], copy: bool = False) -> SimpleNamespace:
    rows = [{S.NAME: HGEMM if i % 2 == 0 else ADD, S.CAT: S.CAT_KERNEL, S.TS: i * 10_000_000, S.DUR: d,
             S.GRID_X: 512, S.GRID_Y: 1, S.GRID_Z: 1, S.BLOCK_X: 256, S.BLOCK_Y: 1, S.BLOCK_Z: 1, S.REGISTERS: 128,
             S.SHARED_MEM: 0, S.OP: i % 2, S.KCLASS: "gemm" if i % 2 == 0 else "elementwise", S.STEP: 0}
            for i, d in enumerate(durs)]
    if copy:
        rows.append({**rows[-1], S.NAME: "Memcpy DtoD (Device -> Device)", S.CAT: "gpu_memcpy", S.OP: -1,
                     S.KCLASS: "copy", S.TS: len(durs) * 10_000_000})
    return SimpleNamespace(gpu=pd.DataFrame(rows), ops=OPS)


def test_engine_uses_the_law_across_chips_only() -> None:
    trace = _trace([200_000, 50_000], copy=True)
    across = predict(trace, H100, RTX4090)
    assert list(across.method) == [SUSTAINED, SUSTAINED, COPY] and len(across.dur_ns) == 3
    assert SUSTAINED not in set(predict(trace, H100, H200).method)  # same chip: the wave law
    r_o, r_t = rates.rates(H100), rates.rates(RTX4090)
    assert across.dur_ns[2] == pytest.approx(50_000 * r_o.dram_gbs / r_t.dram_gbs, abs=1)


def test_h100_hgemm_to_rtx4090_pin() -> None:
    """Regression pin: a 68.7-GFLOP fp16 GEMM that took 200 µs on the H100 (343 TFLOP/s, 45% of its sustained 760)
    runs at the 4090's sustained 168 TFLOP/s (408 µs), with the H100's time beyond its rate overlapping it there: the
    H100's wgmma pipeline runs that work in series, the 4090's mma.sync tensor cores do not (rates.serial_pipes), so
    the soft overlap stays: 0.416 ms. Adding it in series (b59dc97) gave 0.485 ms, the wave law (per-SM datasheet
    peak ratio, 5.8x) 1.198 ms."""
    pred = predict(_trace([200_000]), H100, RTX4090)
    flops = 2.0 * M * N * K
    assert pred.dur_ns[0] >= flops / 168.38e3  # never above the sustained rate
    assert pred.dur_ns[0] / 1e3 == pytest.approx(416.0, abs=0.5)


def test_h100_hgemm_to_b200_adds_its_overhead() -> None:
    """Both GPUs run a GEMM's pipeline fill and epilogue in series with the MMA pipeline (wgmma, tcgen05): the H100's
    time beyond its sustained rate adds to the B200's compute. One wave's share of it (the GEMM's 64 x 8 tiles of 128
    are 4 waves on 132 SMs) is fill and drain, moved at SMs x the clock their tensor peaks are quoted at (1830 and
    1856 MHz); the other waves' is tile work, moved with the math (the B200's fp16 rate is 2.4x; issue 32, part 3)."""
    b200 = CATALOG.resolve("B200")
    pred = predict(_trace([200_000]), H100, b200)
    ro, rt = rates.rates(H100), rates.rates(b200)
    tiles = np.array(M / 128 * N / 128)
    c_o = 2.0 * M * N * K / (ro.tensor_tflops["fp16"] * 1e3 * crossarch.wave_efficiency(tiles, ro.sms))
    c_t = 2.0 * M * N * K / (rt.tensor_tflops["fp16"] * 1e3 * crossarch.wave_efficiency(tiles, rt.sms))
    f = 132 * 1830 / (148 * 1856)
    assert crossarch.gemm_waves(tiles, ro.sms) == 4
    assert pred.dur_ns[0] == pytest.approx(c_t + (200_000 - c_o) * (f / 4 + c_t / c_o * 3 / 4), rel=0.01)


def test_a_many_wave_gemm_keeps_its_fraction_of_the_sustained_rate() -> None:
    """Golden case (issue 32, part 3): a V100 SGEMM at 70% of the V100's sustained 12.45 TFLOP/s (52 waves, DRAM time
    negligible) runs at ~70% of the H100's 51.62 there: all but one wave's share of its time beyond the rate moves
    with the math (x 0.25 with the last-wave efficiencies), that one at SMs x clock (80 x 1380 / (132 x 1980) = 0.42),
    not all of it at SMs x clock as in the first repair."""
    ro, rt = rates.rates(V100), rates.rates(H100)
    flops = 2.0 * 4096 ** 3  # 64 x 64 = 4,096 output tiles of 64 x 64: 51.2 waves on 80 SMs, 31.03 on 132
    t_o = flops / (0.7 * ro.simt_tflops * 1e3 * crossarch.wave_efficiency(np.array(4096.0), ro.sms))
    w = _work([{"t": t_o, "flops": flops, "bytes": 3 * 4 * 4096 ** 2, "pipe": "fp32", "tiles": 4096.0,
                "library": True}])
    t, parts = crossarch.predict_ns(w, ro, rt, same_kernels=True)
    q_o, q_t = (crossarch.wave_efficiency(np.array([4096.0]), r.sms)[0] for r in (ro, rt))
    math, sf = ro.simt_tflops * q_o / (rt.simt_tflops * q_t), 80 * 1380 / (132 * 1980)
    assert bool(parts.additive[0]) and crossarch.gemm_waves(np.array(4096.0), ro.sms) == 52
    assert t[0] / t_o == pytest.approx(0.7 * math + 0.3 * (sf / 52 + math * 51 / 52), rel=1e-3)
    assert t[0] / t_o == pytest.approx(math, rel=0.01)
    # across chips the H100's library picks its own kernel: the further waves at the carried fraction (issue 32)
    chosen, _ = crossarch.predict_ns(w, ro, rt)
    e_o = 0.7 / (0.7 + 0.3 * 51 / 52)  # the origin's fraction beyond its first wave
    e_t = crossarch.carried_efficiency(np.array([e_o]), None)[0]
    assert chosen[0] / t_o == pytest.approx(0.7 * math / e_t + 0.3 * sf / 52, rel=1e-3)


def test_a_single_wave_gemm_moves_as_latency() -> None:
    """A GEMM of one wave is its fill and drain: the 512x512x16 V100 SGEMM of tests/test_wild.py (64 tiles on 80
    SMs, 6 us, 12% of it math) moves its time beyond the rate at SMs x clock, not with the A100's lower FP32 rate per
    SM (that made it 8.4 us)."""
    v100, a100 = CATALOG.resolve("V100 SXM2 16GB"), CATALOG.resolve("A100 SXM4 80GB")
    ro, rt = rates.rates(v100), rates.rates(a100)
    w = _work([{"t": 6_000.0, "flops": 2.0 * 512 * 512 * 16, "bytes": 4.0 * (2 * 512 * 16 + 512 * 512),
                "pipe": "fp32", "tiles": 64.0, "library": True}])
    t, parts = crossarch.predict_ns(w, ro, rt)
    c_t = 2.0 * 512 * 512 * 16 / (rt.simt_tflops * 1e3 * 64 / rt.sms)
    assert t[0] == pytest.approx(c_t + parts.latency[0] * ro.sm_ghz / rt.sm_ghz, rel=0.01) and t[0] < 6_000


def test_which_gpus_run_gemm_overhead_in_series() -> None:
    """rates.serial_pipes from the whitepapers' SM partitions: 32 FP32 lanes per single-dispatch scheduler (GA10x,
    Ada, Hopper, Blackwell), not 16 (Volta, Turing, GA100) nor Pascal's dual dispatch (the P4's 128 lanes); tensor
    cores in series on Hopper and data-center Blackwell only."""
    serial = {n: rates.rates(CATALOG.resolve(n)).serial_pipes for n in
              ("P4", "P100 PCIe 16GB", "V100 PCIe 32GB", "T4", "A100", "RTX 3090", "RTX 4090", "H100", "B200",
               "RTX 5090", "MI300X")}
    assert {n for n, p in serial.items() if "fp32" in p} == {"RTX 3090", "RTX 4090", "H100", "B200", "RTX 5090"}
    assert {n for n, p in serial.items() if "bf16" in p} == {"H100", "B200"}


@given(kernels, gpu_rates, gpu_rates, st.sets(st.sampled_from(PIPES)), st.sets(st.sampled_from(PIPES)))
def test_gemms_add_unless_a_serial_origin_pipe_meets_a_non_serial_one(ks, ro, rt, so, sn) -> None:
    """The split of issue 32: a GEMM with shapes adds its time beyond the rate, except from a serial pipe to a
    non-serial one; the same GPU on both sides still reproduces the origin."""
    ro, rt = replace(ro, serial_pipes=frozenset(so)), replace(rt, serial_pipes=frozenset(sn))
    w = _work(ks)
    _, parts = crossarch.predict_ns(w, ro, rt)
    gemm = np.isfinite(w.tiles) & (np.nan_to_num(w.flops) > 0)
    soft = np.isin(w.pipe, list(so)) & ~np.isin(w.pipe, list(sn))
    assert np.array_equal(parts.additive, gemm & ~soft)
    t, _ = crossarch.predict_ns(w, ro, ro, same_kernels=True)
    np.testing.assert_allclose(t, np.maximum([k["t"] for k in ks], 1.0), rtol=1e-9)


def test_learned_fp32_gemms_keep_precedence_between_pre_hopper_gpus() -> None:
    ops = OPS.assign(**{S.INPUT_TYPES: [["float", "float"], ["float", "float"]]})
    trace = SimpleNamespace(gpu=_trace([5_000_000]).gpu.assign(
        **{S.NAME: "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(Params)"}), ops=ops)
    assert predict(trace, V100, T4).method[0] == LEARNED
    assert predict(trace, H100, T4).method[0] == SUSTAINED  # the H100 is outside the learned model's envelope


# --- issue 32: CUDA-core GEMMs from an older chip to an H100 ------------------------------------------------------
NEUSIGHT = SHARED / "data" / "neusight"
H100_GEMM_BOUND = 0.30  # median |error| of kernels >= 0.1 ms from the 64-lane dev GPUs: 13-26% (2026-11-26), 42-66% before


def _gemm_bench():
    return benchmark_module("benchmarks/crossarch/gemm_kernels.py")


@pytest.mark.skipif(not NEUSIGHT.is_dir(), reason="../shared/data/neusight is absent")
def test_simt_gemms_to_an_h100_are_not_moved_as_latency() -> None:
    """Regression of 67b3d3d (issue 32): the soft split called a CUDA-core GEMM at 60% of its GPU's sustained rate
    latency and moved it at SMs x clock, so NeuSight's A100/V100/P100 SGEMMs of >= 0.1 ms came out 1.4-1.6x too slow
    on our H100 (median +40..+63%). With the loop's other instructions adding to the FMAs they are within a few %."""
    bench = _gemm_bench()
    d = bench.to_h100(bench.D.load_neusight(NEUSIGHT))
    d = d[(d["h100"] == ">= 0.1 ms") & d["origin"].isin(["A100 PCIe 40GB", "V100 PCIe 32GB", "P100 PCIe 16GB"])]
    for origin, g in d.groupby("origin"):
        assert g["law_error"].abs().median() <= H100_GEMM_BOUND, origin
        assert abs(g["law_error"].median()) <= 0.10, origin


@pytest.mark.skipif(not NEUSIGHT.is_dir(), reason="../shared/data/neusight is absent")
def test_a_neusight_layout_folder_is_scored_as_our_h100_set(tmp_path) -> None:
    """``gemm_kernels.py --target DIR`` (NeuSight's own sets of other GPUs, e.g. its H100, L4 and A100 80GB) reads a
    folder in NeuSight's layout and dimension order the way our re-timed H100 set is read (by its latencies): that set
    written out as such a folder scores row for row what to_target gives it with one floor per set."""
    bench = _gemm_bench()
    h = pd.read_csv(bench.H100_CSV)
    for op in ("bmm", "linear"):
        (tmp_path / op).mkdir()
        h[h["OPName"] == op].to_csv(tmp_path / op / "NVIDIA_H100_80GB_HBM3.csv", index=False)
    long = bench.D.load_neusight(NEUSIGHT)
    got = bench.other_targets(long, [tmp_path])
    ours = bench.h100_latencies()
    want = bench.to_target(long, ours, pd.concat([bench.harness_floor_ms(long), bench.harness_floor_ms(ours)]))
    assert list(got) == ["H100 SXM5 80GB"] and len(got["H100 SXM5 80GB"]) == len(want) > 8000
    key = [*bench.SHAPE, "origin"]
    merged = got["H100 SXM5 80GB"].merge(want, on=key, suffixes=("", "_want"))
    assert len(merged) == len(want)
    assert np.allclose(merged["law_error"], merged["law_error_want"])


def test_our_h100_kernel_times_hold_no_host_path() -> None:
    """Regression (issue 32): the re-timed H100 set's ``Kernel Time`` is each call's kernel alone, so scored on it no
    row is above its one-call latency but by the two estimators' spread (the median of 5 profiled calls against the
    mean of the 5 fastest of 25: at most 4.5%, 28 of 1,703 rows) and the floor is the near-empty kernel (a few us),
    where the latency's floor holds the host's launch path (25-77 us in that run)."""
    bench = _gemm_bench()
    lat, ker = bench.h100_latencies(), bench.h100_latencies(kernel_time=True)
    assert len(lat) == len(ker) == 1703 and not ker["harness"].any() and lat["harness"].all()
    assert (ker["t_ms"].to_numpy() <= 1.05 * lat["t_ms"].to_numpy()).all()
    floors = bench.harness_floor_ms(ker)
    assert floors.max() < 0.005 < bench.harness_floor_ms(lat, local=True).min()


def test_the_harness_floor_is_per_op() -> None:
    """Regression (issue 32): the harness floor was the smallest latency of a GPU's whole set, its bmm floor, so every
    linear row kept 5-43 us of its call's host path as GPU work (NeuSight's smallest linear calls take 46-89 us,
    the smallest bmm 28-47 us, shapes of 0.01-0.03 MFLOP in both)."""
    shape = {"b": [1, 1, 1, 1], "m": [8, 2048, 8, 2048], "n": [8, 2048, 8, 2048], "k": [8, 2048, 8, 2048]}
    long = pd.DataFrame({"gpu": ["T4"] * 4, "op": ["bmm", "bmm", "linear", "linear"], "t_ms": [0.031, 0.5, 0.051, 0.7],
                         **shape})
    floors = _gemm_bench().harness_floor_ms(long)
    assert floors.to_dict() == {("T4", "bmm", 1, 8, 8, 8): 0.031, ("T4", "bmm", 1, 2048, 2048, 2048): 0.031,
                                ("T4", "linear", 1, 8, 8, 8): 0.051, ("T4", "linear", 1, 2048, 2048, 2048): 0.051}


def test_a_drifting_harness_floor_is_taken_where_each_row_was_timed() -> None:
    """Regression (issue 32, 2026-12-06): our H100's host path switched between two levels during its run of
    NeuSight's shapes (a near-empty bmm took 44-50 us in its first 936 rows, 28-31 us after: its kernel takes ~3 us),
    so one floor for the whole set (its smallest latency) left ~15 us of host time in every early row's kernel time
    and NeuSight's GPUs' rows under 0.1 ms on it came out 20-29% too fast. With ``local`` each row takes the floor of
    the near-empty GEMMs timed nearest to it, so the level of its own part of the run."""
    bench = _gemm_bench()
    # in timing order: six near-empty calls, a large one, six more at the slow level, then the same at the fast one
    t = [0.045, 0.046, 0.044, 0.047, 0.045, 0.046, 0.300] + [0.046] * 6 + [0.029, 0.030, 0.029, 0.031, 0.029, 0.030,
                                                                            0.284] + [0.030] * 6
    big = [i in (6, 19) for i in range(len(t))]
    long = pd.DataFrame({"gpu": "H100 SXM5 80GB", "op": "bmm", "t_ms": t, "b": 1,
                         "m": [2048 + i if x else 8 + i for i, x in enumerate(big)], "n": [2048 if x else 8 for x in big],
                         "k": [2048 if x else 8 for x in big]})
    local = bench.floor_at(bench.harness_floor_ms(long, local=True), "H100 SXM5 80GB", long)
    assert local[6] == pytest.approx(0.045) and local[19] == pytest.approx(0.029)
    assert (bench.floor_at(bench.harness_floor_ms(long), "H100 SXM5 80GB", long) == 0.029).all()


def test_outputs_per_thread_from_kernel_names() -> None:
    """The diagnostic table's outputs of C per thread: the tile in the kernel's name over its threads per block."""
    names = pd.Series(["sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x32x8_stage3_warpsize2x2x1_ffma_aligna4",
                       "maxwell_sgemm_128x64_nn", "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>",
                       "void magma_sgemmEx_kernel<float, float, float, false, false, 6, 3, 5, 3, 3>(int)"])
    per = _gemm_bench().outputs_per_thread(names, pd.Series([128, 128, 256, 64]))
    assert per.iloc[:3].tolist() == [32.0, 64.0, 128.0] and np.isnan(per.iloc[3])


# --- issue 32: the power limit ------------------------------------------------------------------------------------
def _capped(base: str, fractions: list[float]) -> list:
    """What-if entries of ``base`` at each fraction of its power limit (tdp_w), resolved through a user specs file."""
    import tempfile
    spec = CATALOG.resolve(base)
    names = {f"{base} at {f:.6f}": f for f in fractions}  # equal fractions: one entry
    text = "".join(f'[gpus."{n}"]\nbase = "{base}"\ntdp_w = {spec.tdp_w * f!r}\n' for n, f in names.items())
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as fh:
        fh.write(text)
    catalog = load_catalog(fh.name)
    return [catalog.resolve(f"{base} at {f:.6f}") for f in fractions]


@given(st.sampled_from([s.name for s in NVIDIA if not s.base]), st.floats(0.2, 1.0), st.floats(0.2, 1.0),
       st.lists(st.integers(1_000, 5_000_000), min_size=2, max_size=6))
def test_a_lower_power_limit_is_never_faster(base: str, a: float, b: float, durs: list[int]) -> None:
    """Lowering a GPU's power limit (same chip: a what-if entry of it) never makes any kernel faster, across chips
    (the sustained-rate law) and on the same chip (the wave law), from an H100 trace."""
    lo, hi = sorted((a, b))
    low, high = _capped(base, [lo, hi])
    trace = _trace(durs)
    t_low, t_high = predict(trace, H100, low).dur_ns, predict(trace, H100, high).dur_ns
    t_stock = predict(trace, H100, CATALOG.resolve(base)).dur_ns
    assert np.all(t_low >= t_high - 1) and np.all(t_high >= t_stock - 1)
    r_low, r_high = rates.rates(low), rates.rates(high)
    assert r_low.clock_mhz <= r_high.clock_mhz * (1 + 1e-9)
    pipes = np.array(["fp32", "fp16"], dtype=object)
    assert np.all(r_low.sm_ghz_on(pipes) <= r_high.sm_ghz_on(pipes) * (1 + 1e-9))


def test_power_limit_sets_the_clock_of_a_card_that_cannot_hold_boost() -> None:
    """phi, the measured matmul fraction at the stock limit: an A10 (150 W, 0.45 of its FP16 peak) is held to
    1695 x 0.45 / 0.77 MHz and its unmeasured TF32 runs at the same 0.45, not the median 0.77; an A100 SXM (0.85)
    keeps its boost clock; a 350 W H100 PCIe runs below its 700 W SXM sibling's clock."""
    a10 = rates.rates(CATALOG.resolve("A10"))
    phi = rates.tensor_fraction(CATALOG.resolve("A10"))
    assert phi == pytest.approx(0.448, abs=0.002)
    assert a10.clock_mhz == pytest.approx(1695 * phi / rates.TENSOR_SUSTAINED_FRACTION)
    assert a10.tensor_tflops["tf32"] == pytest.approx(phi * 62.5)
    assert rates.rates(CATALOG.resolve("A100 SXM4 80GB")).clock_mhz == 1410
    assert rates.rates(CATALOG.resolve("H100 PCIe 80GB")).clock_mhz < 1755
    half = _capped("A100 SXM4 80GB", [0.5])[0]
    assert half.boost_clock_mhz == pytest.approx(1410 * 0.5 ** (1 / 3))
    assert "power limit" in half.source


def test_a_measured_sgemm_sets_the_clock_where_no_tensor_matmul_is_catalogued() -> None:
    """The RTX 6000 Ada (300 W, 142 SMs) has a public SGEMM at 0.55 of its FP32 peak and no tensor matmul: against
    the 0.67 median of its class it runs at 2505 x 0.55 / 0.67 MHz and its tensor dtypes at that share of the typical
    fraction; the P100 SXM2, whose SGEMM is above its class's median, keeps its boost clock; a card with a tensor
    matmul (the L40S, 0.51 SGEMM) keeps the clock its tensor fraction gives."""
    ada = CATALOG.resolve("RTX 6000 Ada")
    s = ada.extra["fp32_gemm_sustained_tflops"] / ada.fp32_tflops
    held = 2505 * s / rates.SERIAL_FP32_GEMM_FRACTION
    r = rates.rates(ada)
    assert r.clock_mhz == pytest.approx(held) and held < 2200
    assert r.tensor_tflops["fp16"] == pytest.approx(364.2 * rates.TENSOR_SUSTAINED_FRACTION * held / 2505)
    assert "sm_clock_sustained_mhz" in r.fallbacks and "tensor_sustained_tflops_fp16" in r.fallbacks
    assert rates.rates(CATALOG.resolve("P100 SXM2 16GB")).clock_mhz == 1480
    l40s = CATALOG.resolve("L40S")
    assert rates.power_fraction(l40s) == rates.tensor_fraction(l40s)
    assert rates.rates(l40s).clock_mhz == pytest.approx(2520 * rates.tensor_fraction(l40s) / 0.77)


def test_the_l40_runs_at_its_binding_siblings_clock_for_its_power_limit() -> None:
    """The L40 has no matmul of its own: its catalogued clock is the L40S's (same AD102, 142 SMs, 350 W, held below
    boost by its measured tensor fraction) x (300/350)^(1/3), recomputed here so a change to the L40S's figures fails
    until the L40's follows; its tensor dtypes run at the typical fraction times that share of its boost clock."""
    l40, l40s = CATALOG.resolve("L40"), CATALOG.resolve("L40S")
    assert l40.extra["chip"] == l40s.extra["chip"] and l40.sms == l40s.sms
    sibling = rates.rates(l40s).clock_mhz
    assert sibling < l40s.boost_clock_mhz  # its limit binds: scaling its power says something
    r = rates.rates(l40)
    assert r.clock_mhz == pytest.approx(sibling * (l40.tdp_w / l40s.tdp_w) ** (1 / 3), abs=1.0)
    assert r.tensor_tflops["fp16"] == pytest.approx(181.05 * rates.TENSOR_SUSTAINED_FRACTION * r.clock_mhz / 2490)


def test_the_h100_nvl_runs_at_its_binding_siblings_clock_per_sm_for_its_power_limit() -> None:
    """The H100 NVL has no matmul of its own: its catalogued clock is the H100 PCIe's (same GH100, 350 W over 114 SMs,
    held below boost by its measured tensor fraction) x ((400/132) / (350/114))^(1/3), recomputed here so a change to
    the PCIe card's figures fails until the NVL's follows; below its datasheet tensor clock, which no longer applies."""
    nvl, pcie = CATALOG.resolve("H100 NVL 94GB"), CATALOG.resolve("H100 PCIe 80GB")
    assert nvl.extra["chip"] == pcie.extra["chip"]
    sibling = rates.rates(pcie).clock_mhz
    assert sibling < pcie.boost_clock_mhz
    r = rates.rates(nvl)
    per_sm = (nvl.tdp_w / nvl.sms) / (pcie.tdp_w / pcie.sms)
    assert r.clock_mhz == pytest.approx(sibling * per_sm ** (1 / 3), abs=1.0)
    assert r.tensor_clock_mhz is None and r.clock_mhz < nvl.extra["tensor_clock_mhz_implied"]


def test_the_sgemm_rule_predicts_the_tensor_clocks_better_than_boost() -> None:
    """Pins why the SGEMM rule exists: on every catalog card with both a measured tensor matmul and an SGEMM, the
    clock the SGEMM gives (its class's median taken without the card) is nearer the clock its tensor fraction gives
    than the boost clock is (2026-12-06: 5.9% against 9.9% mean, 36 cards, boost +9.9% biased)."""
    cards = [g for g in NVIDIA if not g.base and g.extra.get("fp32_gemm_sustained_tflops")]
    rule, boost = [], []
    for g in cards:
        if rates.tensor_fraction(g) is None and "sm_clock_sustained_mhz" not in g.extra:
            continue
        serial = "fp32" in rates.serial_pipes(g)
        peers = [h.extra["fp32_gemm_sustained_tflops"] / h.fp32_tflops for h in cards
                 if h.name != g.name and ("fp32" in rates.serial_pipes(h)) == serial]
        s = g.extra["fp32_gemm_sustained_tflops"] / g.fp32_tflops
        base = g.extra.get("base_clock_mhz") or 0.0
        f = max(g.boost_clock_mhz * min(1.0, s / float(np.median(peers))), min(base, g.boost_clock_mhz))
        held = min(rates.rates(g).clock_mhz, g.boost_clock_mhz)  # GeForce boost past their rating: compare at it
        rule.append(abs(f / held - 1))
        boost.append(abs(g.boost_clock_mhz / held - 1))
    assert len(rule) >= 25
    assert np.mean(rule) < 0.07 and np.mean(rule) < 0.7 * np.mean(boost)


def test_the_clock_under_load_never_falls_below_the_base_clock() -> None:
    """NVIDIA guarantees the base clock under load (GPU Boost): the power-limit rule holds a card's clock down to it at
    most. The Quadro RTX 8000, catalogued at the TITAN RTX's 0.41 of its tensor peak, would be at 1770 x 0.41 / 0.77 =
    949 MHz by the ratio and is at its 1395 MHz base; a what-if at half its power limit moves the floor by the same
    law as the boost clock, so it runs slower than the stock card."""
    for spec in NVIDIA:
        base = spec.extra.get("base_clock_mhz")
        if base and not spec.base and "sm_clock_sustained_mhz" not in spec.extra:
            assert rates.rates(spec).clock_mhz >= min(base, spec.boost_clock_mhz) - 1e-9, spec.name
    quadro = CATALOG.resolve("Quadro RTX 8000")
    held = quadro.boost_clock_mhz * rates.tensor_fraction(quadro) / rates.TENSOR_SUSTAINED_FRACTION
    assert held == pytest.approx(949, abs=2)  # what the ratio alone gives
    assert rates.rates(quadro).clock_mhz == pytest.approx(1395)
    half = _capped("Quadro RTX 8000", [0.5])[0]
    assert half.extra["base_clock_mhz"] == pytest.approx(1395 * 0.5 ** (1 / 3))
    assert rates.rates(half).clock_mhz == pytest.approx(1395 * 0.5 ** (1 / 3))


SGEMM = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(Params)"


def _sgemm_trace(durs: list[int]) -> SimpleNamespace:
    """_trace with its GEMMs in fp32 on the CUDA cores: the kernel-choice term's and the learned model's path."""
    trace = _trace(durs)
    gpu = trace.gpu.assign(**{S.NAME: np.where(trace.gpu[S.OP] == 0, SGEMM, ADD)})
    return SimpleNamespace(gpu=gpu, ops=OPS.assign(**{S.INPUT_TYPES: [["float", "float"], ["float", "float"]]}))


@given(st.sampled_from([s.name for s in NVIDIA if not s.base]), st.sampled_from(["H100 SXM5 80GB", "V100 PCIe 32GB",
       "T4", "A100 PCIe 40GB", "RTX 4090"]), st.floats(0.2, 1.0), st.floats(0.2, 1.0),
       st.lists(st.floats(1.0, 20.0), min_size=2, max_size=6), st.booleans())
def test_a_lower_power_limit_is_never_faster_from_any_origin(base: str, origin: str, a: float, b: float,
                                                             slow: list[float], fp32: bool) -> None:
    """Issue 32's property through every path a kernel can take (specs' what-if entry, then the engine): from older
    and newer origins, with the GEMMs in fp16 or on the CUDA cores (the kernel-choice term across chips, the learned
    FP32 model between pre-Hopper GPUs, the wave law on one chip), a GPU at a lower power limit is never faster.
    Each kernel takes ``slow`` times what the origin's datasheet peak allows (a trace the origin could record)."""
    lo, hi = sorted((a, b))
    low, high = _capped(base, [lo, hi])
    src = CATALOG.resolve(origin)
    gemm_ns = 2 * M * N * K / (src.fp32_tflops if fp32 else src.tensor_tflops.get("fp16", src.fp32_tflops)) / 1e3
    add_ns = 3 * 16 * 512 * 1024 * 2 / src.memory_bandwidth_gbs
    durs = [int(x * (gemm_ns if i % 2 == 0 else add_ns)) + 1 for i, x in enumerate(slow)]
    trace = _sgemm_trace(durs) if fp32 else _trace(durs)
    t_low, t_high = predict(trace, src, low).dur_ns, predict(trace, src, high).dur_ns
    assert np.all(t_low >= t_high - 1)
    assert np.all(t_high >= predict(trace, src, CATALOG.resolve(base)).dur_ns - 1)


def test_gpus_says_what_sets_each_clock_under_load() -> None:
    """`habitat-trace gpus` reports the clock the law takes and why: the A10's power limit from its tensor matmul, the
    RTX 6000 Ada's from its SGEMM, the Quadro RTX 8000 at its base clock, the T4's sourced figure, the H100's measured
    clock with its tensor work at the datasheet's tensor clock, the H100 NVL's derived one, a card with no matmul (the
    A30) at boost."""
    from habitat_trace.commands.gpus import spec_to_dict
    got = {n: spec_to_dict(CATALOG.resolve(n)) for n in ("A10", "RTX 6000 Ada", "Quadro RTX 8000", "T4",
                                                          "H100 SXM5 80GB", "H100 NVL 94GB", "A30")}
    assert got["A10"]["clock_under_load_basis"] == "power limit: tensor matmul at 0.45 of peak"
    assert got["A10"]["clock_under_load_mhz"] == pytest.approx(rates.rates(CATALOG.resolve("A10")).clock_mhz)
    assert got["RTX 6000 Ada"]["clock_under_load_basis"] == "power limit: SGEMM at 0.55 of FP32 peak"
    assert got["Quadro RTX 8000"]["clock_under_load_basis"].startswith("base clock (floor)")
    assert got["T4"]["clock_under_load_basis"].startswith("catalog: published observation")
    assert got["H100 SXM5 80GB"]["clock_under_load_basis"] == (
        "catalog: measured; tensor work at 1830 MHz (datasheet tensor clock)")
    assert got["H100 NVL 94GB"]["clock_under_load_basis"] == "catalog: derived"
    assert got["A30"]["clock_under_load_basis"] == "boost: no matmul of this card catalogued"


def test_the_rate_warnings_say_which_rule_stands_in_for_a_missing_tensor_rate() -> None:
    """A prediction names each catalog figure a rule supplied for the pipes its trace uses: the RTX 6000 Ada's fp16
    (no tensor matmul; its SGEMM shows the power limit) and the L40's (a catalogued clock) are held down by it, the H100
    A30's (nothing catalogued) is the median, and the A10's fp16 is measured."""
    trace = _trace([200_000, 50_000])

    def said(target: str, origin=H100) -> str:
        return " ".join(w for w in predict(trace, origin, CATALOG.resolve(target)).warnings if target in w)

    for held in ("RTX 6000 Ada", "L40"):
        assert "at the share of its boost clock its SGEMM or catalogued clock shows" in said(held), held
    assert "the median sustained/datasheet ratio of the catalogued GPUs stands in" in said("A30")
    assert said("A10") == ""  # its fp16 is measured: nothing stands in for the pipes this trace uses

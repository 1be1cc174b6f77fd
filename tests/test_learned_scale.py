"""The learned GEMM model inside `scale`: used for FP32 CUDA-core GEMMs between two real GPUs inside its trained
range (method 'learned', the op's ratio applied to each of its kernels, never below the roofline), never for
what-if variants or GPUs outside that range (H100/H200: wave law), and consistent with the model's own API."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from habitat_trace.ingest import schema as S
from habitat_trace.scale import learned
from habitat_trace.scale.cost import gemm_dims
from habitat_trace.scale.engine import predict
from habitat_trace.scale.learned import envelope
from habitat_trace.scale.learned import model as M
from habitat_trace.scale.prediction import LEARNED, METHODS
from habitat_trace.scale.specs import load_catalog
from tests.conftest import ROOT

CATALOG = load_catalog()
V100, A100, T4 = (CATALOG.resolve(n) for n in ("V100", "A100", "T4"))
H100, H200 = CATALOG.resolve("H100"), CATALOG.resolve("H200")
OPS = pd.DataFrame({
    S.NAME: ["aten::mm", "aten::addmm", "aten::mm", "aten::add"],
    S.INPUT_DIMS: [[[2048, 1024], [1024, 4096]], [[1000], [256, 2048], [2048, 1000], [], []],
                   [[2048, 1024], [1024, 4096]], [[64, 1024], [64, 1024]]],
    S.INPUT_TYPES: [["float", "float"], ["float", "float", "float", "Scalar", "Scalar"],
                    ["c10::BFloat16", "c10::BFloat16"], ["float", "float"]],
})
SGEMM = "volta_sgemm_128x64_nn"
KERNELS = [  # (op, name, class, dur ns)
    (0, SGEMM, "gemm", 900_000),
    (1, "volta_sgemm_64x32_sliced1x4_tn", "gemm", 60_000),
    (1, "void splitKreduce_kernel<float, float, float, float>(cublasSplitKParams<float>)", "gemm", 6_000),
    (2, "volta_h884gemm_128x128_ldg8_nn", "gemm", 300_000),  # a tensor-core GEMM: not the FP32 model's
    (3, "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>", "elementwise", 5_000),
]


def _trace() -> SimpleNamespace:
    rows = [{S.NAME: name, S.CAT: S.CAT_KERNEL, S.TS: i * 10_000_000, S.DUR: dur, S.GRID_X: 256, S.GRID_Y: 1,
             S.GRID_Z: 1, S.BLOCK_X: 256, S.BLOCK_Y: 1, S.BLOCK_Z: 1, S.REGISTERS: 64, S.SHARED_MEM: 16384,
             S.OP: op, S.KCLASS: cls, S.STEP: 0} for i, (op, name, cls, dur) in enumerate(KERNELS)]
    return SimpleNamespace(gpu=pd.DataFrame(rows), ops=OPS)


def test_fp32_gemms_between_covered_gpus_use_the_model():
    pred = predict(_trace(), V100, A100)
    assert list(pred.method[:3]) == [LEARNED] * 3
    assert pred.method[3] != LEARNED and pred.method[4] != LEARNED  # bf16 tensor-core GEMM, elementwise
    r = float(np.ravel(learned.gemm_time_ratios(2048, 4096, 1024, 1, "fp32", V100, A100, 900_000))[0])
    assert pred.dur_ns[0] == pytest.approx(900_000 * r, abs=1)
    # one op, two kernels (GEMM + split-K reduction): one ratio, from the op's summed time
    r1 = float(np.ravel(learned.gemm_time_ratios(256, 1000, 2048, 1, "fp32", V100, A100, 66_000))[0])
    assert pred.dur_ns[1] == pytest.approx(60_000 * r1, abs=1)
    assert pred.dur_ns[2] == pytest.approx(6_000 * r1, abs=1)


def test_learned_prediction_respects_the_roofline():
    t = _trace()
    t.gpu.loc[0, S.DUR] = 30_000  # an impossible 30 us origin time for a 17 GFLOP GEMM (inside the trained times)
    pred = predict(t, V100, T4)
    flops, nbytes = M.gemm_cost(1, 2048, 4096, 1024)
    assert pred.dur_ns[0] >= M.roofline_ms(flops, nbytes, M.gpu_vector(T4)) * 1e6 - 1


@pytest.mark.parametrize("origin,target", [(H100, H200), (H200, H100), (V100, H100), (H100, A100)])
def test_outside_the_trained_range_the_wave_law_stays(origin, target):
    assert LEARNED not in set(predict(_trace(), origin, target).method)


def test_what_if_variants_keep_the_wave_law():
    half = CATALOG.resolve("V100")
    variant = replace(half, name="V100 half SMs", sms=half.sms // 2, base="V100 SXM2 32GB")
    assert not envelope.covers(variant)
    assert LEARNED not in set(predict(_trace(), V100, variant).method)


@pytest.mark.parametrize("origin,target", [("A100 PCIe 40GB", "A100 PCIe 80GB"), ("V100 PCIe 32GB", "V100 SXM2 32GB")])
def test_two_boards_of_one_chip_keep_the_wave_law(origin, target):
    """Regression (issue 32, 2026-12-06): the model, trained on pairs of five different chips, priced an A100 PCIe
    80GB's FP32 GEMMs at a median 1.10x the 40 GB board's time (a board with more bandwidth and power, the same
    kernels); two boards of one chip take the wave law, as a what-if GPU does."""
    o, t = CATALOG.resolve(origin), CATALOG.resolve(target)
    assert envelope.covers(o) and envelope.covers(t)
    pred = predict(_trace(), o, t)
    assert LEARNED not in set(pred.method)
    assert pred.dur_ns[0] <= _trace().gpu[S.DUR][0] * 1.01  # never slower on a board with more of everything


def test_envelope_matches_the_shipped_models_training_gpus():
    """A model retrained on other GPUs must come with a new range (envelope.TRAINED_ON)."""
    meta = M.load().meta
    for gpu in envelope.TRAINED_ON:
        assert gpu in meta, f"{gpu} is in envelope.TRAINED_ON but not in the model's training set: {meta}"
    assert all(envelope.covers(CATALOG.resolve(g)) for g in envelope.TRAINED_ON)
    for gpu in envelope.TRAINED_ON:  # the envelope's copy of the catalog values is the catalog's
        spec = CATALOG.resolve(gpu)
        assert envelope.TRAINED_VALUES[gpu] == tuple(getattr(spec, f) for f in envelope.FIELDS), gpu
    assert LEARNED in METHODS


@pytest.mark.parametrize("name,dims,want", [
    ("aten::mm", [[64, 32], [32, 16]], (1, 64, 16, 32)),
    ("aten::addmm", [[16], [64, 32], [32, 16], [], []], (1, 64, 16, 32)),
    ("aten::bmm", [[8, 64, 32], [8, 32, 16]], (8, 64, 16, 32)),
    ("aten::linear", [[4, 64, 32], [16, 32], [16]], (1, 256, 16, 32)),
    ("aten::mm", [[], []], None),
    ("aten::add", [[64, 32], [64, 32]], None),
    ("aten::mm", "not a list", None),
])
def test_gemm_dims(name, dims, want):
    assert gemm_dims(name, dims) == want


def test_external_v100_trace_uses_the_model_for_its_sgemms():
    path = ROOT.parent / "shared" / "data" / "external-traces" / "v100_resnet50_2021_tbplugin.pt.trace.json.gz"
    if not path.exists():
        pytest.skip("../shared is absent")
    from habitat_trace.ingest import load

    trace = load(path)
    pred = predict(trace, CATALOG.for_device(trace.device_name), A100)
    learned_rows = pred.method == LEARNED
    assert learned_rows.sum() > 0
    names = trace.gpu[S.NAME].to_numpy()[learned_rows]
    assert all("sgemm" in n or "splitKreduce" in n for n in names)
    assert np.all(pred.dur_ns[learned_rows] >= 1)

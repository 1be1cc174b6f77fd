"""The shipped GEMM ratio model: small, torch-free at predict time, never faster than the roofline, accurate on a
held-out slice of the NeuSight data (benchmarks/tests/test_learned_training.py, with the training code)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.scale.learned import gemm_time_ratios
from habitat_trace.scale.learned import model as M
from habitat_trace.scale.specs import load_catalog
from tests.conftest import imports_torch

CATALOG = load_catalog()
GPUS = ["P100 PCIe 16GB", "P4", "T4", "V100 PCIe 32GB", "A100 PCIe 40GB", "H100 SXM5 80GB", "L4", "B200"]
MAX_MODEL_BYTES = 5 * 1024 * 1024  # issue 6: the shipped model stays under 5 MB


def gemm_time_ratio(m: int, n: int, k: int, batch: int, dtype: str, origin, target, t_origin_ns: float):
    """One GEMM's ratio, None out of the model's domain (the scalar form these tests read best in)."""
    r = float(gemm_time_ratios(m, n, k, batch, dtype, origin, target, t_origin_ns).reshape(-1)[0])
    return None if np.isnan(r) else r


def test_model_is_small_and_loads():
    assert M.WEIGHTS.stat().st_size <= MAX_MODEL_BYTES
    mlp = M.load()
    assert mlp.mean.shape == (len(M.FEATURES),)
    assert "NeuSight" in mlp.meta


def test_inference_does_not_import_torch():
    assert not imports_torch(
        "from habitat_trace.scale.learned import gemm_time_ratios; "
        "from habitat_trace.scale.specs import load_catalog; c = load_catalog(); "
        "r = gemm_time_ratios(512, 512, 512, 1, 'fp32', c.resolve('V100'), c.resolve('A100'), 1e5); "
        "assert r == r")


@pytest.mark.slow
def test_the_torch_import_check_can_fail():
    pytest.importorskip("torch")
    assert imports_torch("import torch")


def test_out_of_domain_is_none():
    v100, a100 = CATALOG.resolve("V100"), CATALOG.resolve("A100")
    assert gemm_time_ratio(512, 512, 512, 1, "bf16", v100, a100, 1e5) is None  # no bf16 data yet
    assert gemm_time_ratio(0, 512, 512, 1, "fp32", v100, a100, 1e5) is None
    assert gemm_time_ratio(512, 512, 10**7, 1, "fp32", v100, a100, 1e5) is None
    assert np.isnan(gemm_time_ratios([512, 0], 512, 512, 1, "fp32", v100, a100, 1e5)[1])


def test_every_catalog_gpu_has_a_process_node():
    missing = [s.name for s in CATALOG.specs if np.isnan(M.process_nm(s))]
    assert not missing, f"add their chips to model.PROCESS_NM: {missing}"


def test_tdp_limited_clock():
    """Low-TDP cards throttle under long SGEMMs, 250 W ones do not; short kernels run near boost clock."""
    vec = {g: M.gpu_vector(CATALOG.resolve(g)) for g in ("T4", "P4", "V100 PCIe 32GB", "A100 PCIe 40GB")}
    assert M.sustained_fraction(vec["T4"]) < M.sustained_fraction(vec["P4"]) < 1.0
    assert M.sustained_fraction(vec["V100 PCIe 32GB"]) == M.sustained_fraction(vec["A100 PCIe 40GB"]) == 1.0
    assert M.clock_fraction(vec["T4"], 0.05) > 0.95
    assert M.clock_fraction(vec["T4"], 50.0) == pytest.approx(M.sustained_fraction(vec["T4"]), abs=0.01)
    assert M.clock_fraction(vec["V100 PCIe 32GB"], 50.0) == 1.0


def test_same_gpu_is_ratio_one():
    v100 = CATALOG.resolve("V100")
    r = gemm_time_ratios([64, 4096], [64, 4096], [64, 4096], 1, "fp32", v100, v100, [5e4, 2e7])
    assert np.array_equal(r, [1.0, 1.0])


# inside the trained range (learned.TRAINED_DIMS, MIN_T_ORIGIN_NS): outside it there is no ratio (issue 18)
@given(m=st.integers(3, 8192), n=st.integers(2, 16384), k=st.integers(1, 16384), b=st.integers(1, 512),
       t_us=st.floats(28.4, 1e5), o=st.sampled_from(GPUS), t=st.sampled_from(GPUS))
def test_never_faster_than_the_target_roofline(m, n, k, b, t_us, o, t):
    origin, target = CATALOG.resolve(o), CATALOG.resolve(t)
    r = gemm_time_ratio(m, n, k, b, "fp32", origin, target, t_us * 1e3)
    assert r is not None and np.isfinite(r) and r > 0
    flops, nbytes = M.gemm_cost(b, m, n, k)
    floor_ns = max(flops / (target.fp32_tflops * 1e3), nbytes / target.memory_bandwidth_gbs)
    assert r * t_us * 1e3 >= floor_ns * (1 - 1e-9)

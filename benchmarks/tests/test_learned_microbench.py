"""The microbenchmark GEMM ratio table (benchmarks/learned/training/microbench.py): numpy-only, identity on one GPU,
never below the target's roofline, the measured ratio at a measured shape, out of domain far from the data and for
what-if variants; and not used by ``scale`` (it lost to the wave law on the held-out traces:
benchmarks/results/learned_microbench.md), so H100 <-> H200 GEMMs keep the wave law."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from habitat_trace.ingest import schema as S
from habitat_trace.scale.engine import predict
from training import microbench as MB
from habitat_trace.scale.specs import load_catalog
from tests.conftest import ROOT, imports_torch

CATALOG = load_catalog(ROOT / "benchmarks" / "specs_sm_limited.toml")
H100, H200, H100_SM64, A100 = (CATALOG.resolve(n) for n in ("H100", "H200", "H100-SM64", "A100"))
MAX_TABLE_BYTES = 1024 * 1024
# benchmarks/results/queued/: linear 8192 x 3072 x 768 bf16 took 0.059857 ms on the H100 SXM, 0.058206 on the H200
# (nvjet_sm90_tst_256x128 on both); stored as float32, hence the last digits
GOLDEN_RATIO = 0.9724091


def test_table_is_small_and_numpy_only():
    assert MB.TABLE.stat().st_size <= MAX_TABLE_BYTES
    assert not imports_torch(
        f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks' / 'learned')!r}); "
        "from training import microbench as MB; "
        "from habitat_trace.scale.specs import load_catalog; c = load_catalog(); "
        "r = MB.gemm_time_ratios(1, 4096, 4096, 4096, 'bf16', c.resolve('H100'), c.resolve('H200'), 2e5); "
        "assert 0.5 < float(r) < 2")


def test_golden_ratio_at_a_measured_shape_and_its_inverse():
    r = MB.gemm_time_ratios(1, 8192, 3072, 768, "bf16", H100, H200, 59_857.0)
    assert float(r) == pytest.approx(GOLDEN_RATIO, rel=1e-6)
    back = MB.gemm_time_ratios(1, 8192, 3072, 768, "bf16", H200, H100, 58_206.0)
    assert float(back) == pytest.approx(1 / GOLDEN_RATIO, rel=1e-6)


@pytest.mark.parametrize("dtype", MB.DTYPES)
def test_same_gpu_is_identity(dtype):
    r = MB.gemm_time_ratios([1, 8], [512, 2048], [512, 1024], [512, 64], dtype, H200, H200, [1e6, 1e6])
    np.testing.assert_array_equal(r, [1.0, 1.0])


def test_never_below_the_target_roofline():
    # 2 * 4096^3 bf16 FLOPs take >= 139 us at the H200's 989 TFLOP/s; a 100 ns origin time cannot shrink below it
    t_o = 100.0
    r = float(MB.gemm_time_ratios(1, 4096, 4096, 4096, "bf16", H100, H200, t_o))
    floor_ns = 2.0 * 4096 ** 3 / (H200.tensor_peak_tflops("bf16") * 1e3)
    assert r * t_o == pytest.approx(floor_ns, rel=1e-9)


def test_out_of_domain_is_nan():
    assert np.isnan(MB.gemm_time_ratios(1, 2 ** 20, 3072, 768, "bf16", H100, H200, 1e6))  # far from every shape
    assert np.isnan(MB.gemm_time_ratios(1, 8192, 3072, 768, "int8", H100, H200, 1e6))  # dtype never measured
    assert np.isnan(MB.gemm_time_ratios(1, 8192, 3072, 768, "bf16", A100, H200, 1e6))  # no A100 table


def test_what_if_variants_are_not_covered():
    # the same chip with fewer SMs: the library keeps its kernels there, the wave law's premise (envelope.py)
    assert MB.covers(H100, H200) and MB.covers(H200, H100)
    assert not MB.covers(H100, H100_SM64) and not MB.covers(H100_SM64, H200)
    assert np.isnan(MB.gemm_time_ratios(1, 8192, 3072, 768, "bf16", H100, H100_SM64, 1e6))


def test_scale_keeps_the_wave_law_between_h100_and_h200():
    ops = pd.DataFrame({S.NAME: ["aten::mm"], S.INPUT_DIMS: [[[8192, 768], [768, 3072]]],
                        S.INPUT_TYPES: [["c10::BFloat16", "c10::BFloat16"]]})
    row = {S.NAME: "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", S.CAT: S.CAT_KERNEL, S.TS: 0, S.DUR: 60_000,
           S.GRID_X: 132, S.GRID_Y: 1, S.GRID_Z: 1, S.BLOCK_X: 384, S.BLOCK_Y: 1, S.BLOCK_Z: 1, S.REGISTERS: 168,
           S.SHARED_MEM: 200_000, S.OP: 0, S.KCLASS: "gemm", S.STEP: 0}
    trace = SimpleNamespace(gpu=pd.DataFrame([row]), ops=ops)
    for origin, target in ((H100, H200), (H200, H100), (H100, H100_SM64)):
        assert set(predict(trace, origin, target).method) == {"roofline-op"}

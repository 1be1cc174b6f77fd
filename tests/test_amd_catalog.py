"""The AMD Instinct entries of specs/gpus.toml (issue 20): sourced, in CDNA ranges, internally consistent, and a
ROCm deviceProperties entry with a generic name identifies its GPU."""
from __future__ import annotations

import pytest

from habitat_trace.scale.gpu import GFXIP_VERSION
from habitat_trace.scale.specs import load_catalog

CATALOG = load_catalog()
AMD = [s for s in CATALOG.specs if s.vendor == "amd"]
# peak FLOP per clock per CU of the matrix cores (ROCm docs MI100 / MI250 / MI300 / MI350 tables)
FP16_FLOP_PER_CLK_CU = {"gfx908": 1024, "gfx90a": 1024, "gfx942": 2048, "gfx950": 4096}


def test_the_issue_list_is_in_the_catalog():
    names = {s.name for s in AMD}
    assert {"MI100", "MI210", "MI250 GCD", "MI250X GCD", "MI300X", "MI325X", "MI355X"} <= names
    assert CATALOG.resolve("MI250").name == "MI250 GCD" and CATALOG.resolve("mi300x").name == "MI300X"
    assert all(s.vendor == "nvidia" for s in CATALOG.specs if s not in AMD)


@pytest.mark.parametrize("spec", AMD, ids=lambda s: s.name)
def test_amd_gpu_is_sourced_and_in_cdna_ranges(spec):
    assert "ROCm docs" in spec.source or "AnandTech" in spec.source  # a primary or a dated secondary source
    assert spec.occupancy.compute_capability == spec.compute_capability in GFXIP_VERSION
    assert spec.occupancy.warp_size == 64
    assert 100 <= spec.sms <= 304 and 1400 <= spec.boost_clock_mhz <= 2500
    assert 1000 <= spec.memory_bandwidth_gbs <= 8000 and 32 <= spec.memory_gib <= 288
    assert spec.interconnect.startswith(("PCIe", "Infinity Fabric"))
    # vector FP32 without packed math is 128 FLOP/clk/CU (ROCm MI100 and MI250 tables)
    assert spec.fp32_tflops == pytest.approx(spec.sms * 128 * spec.boost_clock_mhz * 1e-6, rel=0.01)
    # matrix FP32 is twice that on every CDNA generation (ROCm tables: 256 FLOP/clk/CU)
    assert spec.tensor_tflops["fp32"] == pytest.approx(2 * spec.fp32_tflops, rel=0.01)
    fp16 = FP16_FLOP_PER_CLK_CU[spec.compute_capability] * spec.sms * spec.boost_clock_mhz * 1e-6
    assert spec.tensor_tflops["fp16"] == pytest.approx(fp16, rel=0.02)
    if spec.price is not None:
        assert spec.price.source and spec.price.date and 0.5 <= spec.price.usd_per_hour <= 20


def test_cdna_occupancy_limits():
    occ = CATALOG.occupancy
    assert occ["gfx908"].max_warps_per_sm == 40  # 10 waves per SIMD before gfx90a (LLVM getMaxWavesPerEU)
    for cc in ("gfx90a", "gfx942", "gfx950"):
        assert occ[cc].max_warps_per_sm == 32 and occ[cc].max_threads_per_sm == 2048
    for cc, lim in occ.items():
        if cc.startswith("gfx"):
            assert lim.source and lim.warp_size == 64 and lim.max_threads_per_block == 1024
            assert lim.shared_mem_per_sm_bytes == (160 if cc == "gfx950" else 64) * 1024  # LDS per CU


def test_generic_rocm_name_is_identified_by_cus_memory_and_gfxip():
    mi250_gcd = {"name": "AMD Radeon Graphics", "numSms": 104, "warpSize": 64, "computeMajor": 9,
                 "computeMinor": 0, "totalGlobalMem": 68702699520}  # the HTA MI250 trace's device 0
    assert CATALOG.for_properties(mi250_gcd).name == "MI250 GCD"  # MI210 matches too: first listed wins
    mi300x = dict(mi250_gcd, numSms=304, computeMinor=4, totalGlobalMem=205822885888)
    assert CATALOG.for_properties(mi300x).name == "MI300X"
    mi100 = dict(mi250_gcd, numSms=120, totalGlobalMem=34342961152)
    assert CATALOG.for_properties(mi100).name == "MI100"
    assert CATALOG.for_properties(dict(mi250_gcd, warpSize=32)) is None  # not AMD
    assert CATALOG.for_properties(dict(mi250_gcd, numSms=96)) is None  # no such Instinct

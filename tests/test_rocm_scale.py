"""Scaling ROCm traces and scaling to AMD GPUs (issue 20): AMD -> AMD is the wave law with CDNA occupancy, NVIDIA <->
AMD goes through scale/vendor.py; every kernel's method (and why) is recorded; a trace scaled to its own AMD GPU
round-trips to the nanosecond."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.cli import main
from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.scale import occupancy, vendor
from habitat_trace.scale.engine import predict
from habitat_trace.scale.prediction import BANDWIDTH, COPY, METHODS, ROOFLINE_OP
from habitat_trace.scale.specs import load_catalog
from tests.conftest import EXTERNAL, MLP_FIXTURE, needs_external
from tests.test_rocm import AMD_FIXTURE

CATALOG = load_catalog()


def test_amd_trace_scaled_to_its_own_gpu_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "same.pt.trace.json.gz"
    # the origin is identified as the MI250 GCD; the profiler's overhead kept, so every time must come back
    main(["scale", str(AMD_FIXTURE), "--to", "MI250", "-o", str(out), "--keep-profiler-overhead"])
    before, after = load(AMD_FIXTURE), load(out)
    assert np.array_equal(before.gpu[S.TS].to_numpy(), after.gpu[S.TS].to_numpy())
    assert np.array_equal(before.gpu[S.DUR].to_numpy(), after.gpu[S.DUR].to_numpy())
    assert np.array_equal(before.event_ts_ns, after.event_ts_ns)
    assert after.vendor == "amd" and after.device_properties["computeMajor"] == 9


@needs_external
@pytest.mark.parametrize("target, methods", [
    ("H100", {BANDWIDTH, ROOFLINE_OP, COPY}),  # across vendors
    ("MI300X", {"wave", ROOFLINE_OP, COPY}),  # AMD -> AMD: the wave law with CDNA occupancy
])
def test_shared_amd_trace_scales_with_every_method_recorded(target: str, methods: set, tmp_path: Path) -> None:
    trace = load(EXTERNAL / "amd_mi250_minitoy_rocm6.json.gz")
    origin = CATALOG.for_properties(trace.device_properties)
    assert origin is not None and origin.name == "MI250 GCD"
    p = predict(trace, origin, CATALOG.resolve(target))
    assert set(p.method) == methods and set(p.method) <= set(METHODS)
    kernels = (trace.gpu[S.CAT] == S.CAT_KERNEL).to_numpy()
    assert all(r for r in p.reason[kernels]), "every kernel says how (or on what assumption) it was predicted"
    if target == "MI300X":
        assert set(p.reason[kernels]) == {vendor.ROCM_REASON}
    out = tmp_path / f"{target}.pt.trace.json.gz"
    main(["scale", str(EXTERNAL / "amd_mi250_minitoy_rocm6.json.gz"), "--to", target, "-o", str(out)])
    assert (load(out).gpu[S.DUR] > 0).all()


def test_nvidia_trace_to_an_amd_gpu_records_cross_vendor_methods() -> None:
    trace = load(MLP_FIXTURE)
    p = predict(trace, CATALOG.resolve("H100"), CATALOG.resolve("MI300X"))
    library = np.isin(trace.gpu[S.KCLASS].to_numpy(), ("gemm", "conv", "attention", "rnn"))
    assert set(p.method[library]) == {ROOFLINE_OP} and set(p.method[~library]) <= {BANDWIDTH, COPY}
    assert set(p.reason[library]) <= {vendor.LIBRARY_REASON, vendor.NO_SHAPES_REASON}


def _amd_twin(nvidia):
    """An AMD GPU with the NVIDIA GPU's CUs, clock, bandwidth and peaks (FP32 GEMMs on its matrix cores at the
    NVIDIA CUDA-core rate): the cross-vendor rules must then change nothing."""
    mi300x = CATALOG.resolve("MI300X")
    peaks = {**nvidia.tensor_tflops, "fp32": nvidia.fp32_tflops}
    return replace(mi300x, name="twin", sms=nvidia.sms, boost_clock_mhz=nvidia.boost_clock_mhz,
                   memory_bandwidth_gbs=nvidia.memory_bandwidth_gbs, fp32_tflops=nvidia.fp32_tflops,
                   tensor_tflops=peaks)


@given(st.sampled_from(["H100", "A100", "L4", "V100"]))
def test_cross_vendor_rules_are_ratios_of_the_two_gpus(name: str) -> None:
    """Both rules are ratios of the two GPUs' peaks and bandwidths: an AMD twin of the origin predicts the origin's
    own times (to the rounding ns), in both directions."""
    nvidia = CATALOG.resolve(name)
    trace = load(MLP_FIXTURE)
    for origin, target in ((nvidia, _amd_twin(nvidia)), (_amd_twin(nvidia), nvidia)):
        p = predict(trace, origin, target)
        assert np.abs(p.dur_ns - trace.gpu[S.DUR].to_numpy()).max() <= 1
        assert BANDWIDTH in set(p.method)


def test_cdna_workgroups_per_cu() -> None:
    """LLVM AMDGPUBaseInfo.cpp getMaxWorkGroupsPerCU: one-wave workgroups are limited by waves (32 on gfx90a),
    wider ones by waves / waves per workgroup and 16 barriers; LDS 64 KiB per CU."""
    lim = CATALOG.occupancy["gfx90a"]
    threads = np.array([64, 128, 256, 1024, 64])
    smem = np.array([0, 0, 0, 0, 16384])
    got = occupancy.cdna_blocks_per_cu(threads, np.zeros(5, dtype=np.int64), smem, lim)
    assert got.tolist() == [32, 16, 8, 2, 4]
    assert occupancy.cdna_blocks_per_cu(np.array([64]), np.array([0]), np.array([0]),
                                        CATALOG.occupancy["gfx908"]).tolist() == [40]


def test_compare_h100_with_amd_targets_and_prices(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    main(["compare", str(MLP_FIXTURE), "--to", "H100,MI300X,MI100", "--format", "json"])
    rows = {r["gpu"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == ["H100 SXM5 80GB", "MI300X", "MI100"]  # the origin first, listed once
    assert rows["MI300X"]["usd_per_hour"] == 2.59 and "digitalocean" in rows["MI300X"]["price_source"]
    assert rows["MI100"]["usd_per_hour"] is None  # no public on-demand price
    assert set(rows["MI300X"]["method_share"]) <= {BANDWIDTH, ROOFLINE_OP, COPY}
    assert rows["MI100"]["gpu_busy_ms"] > rows["H100 SXM5 80GB"]["gpu_busy_ms"]


def test_gpus_lists_the_amd_entries(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    main(["gpus", "--format", "json"])
    by_name = {g["name"]: g for g in json.loads(capsys.readouterr().out)}
    assert {"MI100", "MI210", "MI250 GCD", "MI250X GCD", "MI300X", "MI325X", "MI355X"} <= set(by_name)
    assert by_name["MI300X"]["compute_capability"] == "gfx942" and by_name["MI300X"]["sms"] == 304


def test_learned_gemm_model_stays_off_amd_gpus() -> None:
    """Regression: with the AMD chips' process nodes in the catalog, the MI100 (23.1 TF FP32, 1.2 TB/s, 120 CUs)
    falls inside the learned model's NVIDIA training range; it was trained on CUDA-core SGEMMs only."""
    from habitat_trace.scale.learned import envelope

    assert not any(envelope.covers(s) for s in CATALOG.specs if s.vendor == "amd")
    assert envelope.covers(CATALOG.resolve("V100 PCIe 32GB"))

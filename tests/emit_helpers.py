"""Hand-built GpuSpecs and Predictions for emit tests (no catalog or engine needed)."""
from __future__ import annotations

from typing import Any

import numpy as np

from habitat_trace.ingest import schema as S
from habitat_trace.scale.gpu import GpuSpec, OccupancyLimits
from habitat_trace.scale.prediction import FALLBACK, IDENTITY, Prediction

HOPPER = OccupancyLimits(
    compute_capability="9.0", warp_size=32, max_threads_per_block=1024, max_threads_per_sm=2048,
    max_warps_per_sm=64, max_blocks_per_sm=32, registers_per_sm=65536, max_registers_per_block=65536,
    max_registers_per_thread=255, register_alloc_unit=256, warp_alloc_granularity=4,
    shared_mem_per_sm_bytes=233472, shared_mem_carveout_kib=(0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    shared_mem_per_block_optin_bytes=232448, shared_mem_alloc_unit_bytes=128,
    reserved_shared_mem_per_block_bytes=1024, source="CUDA C++ Programming Guide, cc 9.0",
)


def spec(name: str = "H100 SXM5 80GB", sms: int = 132, memory_gib: float = 79.18) -> GpuSpec:
    return GpuSpec(name=name, architecture="Hopper", compute_capability="9.0", sms=sms, boost_clock_mhz=1980.0,
                   memory_gib=memory_gib, memory_bandwidth_gbs=3350.0, l2_cache_mib=50.0, fp32_tflops=66.9,
                   tensor_tflops={"tf32": 494.7, "bf16": 989.4}, tdp_w=700.0, interconnect="NVLink 4",
                   source="test", occupancy=HOPPER, device_names=("NVIDIA H100 80GB HBM3",))


def scaled(trace: Any, factor: float = 1.0, target: GpuSpec | None = None) -> Prediction:
    """Every GPU duration x factor (>= 1 ns); identity method when factor == 1."""
    old = trace.gpu[S.DUR].to_numpy()
    dur = old if factor == 1.0 else np.maximum(np.rint(old * factor), 1).astype(np.int64)
    method = IDENTITY if factor == 1.0 else FALLBACK
    reason = "" if factor == 1.0 else f"test: x{factor}"
    n = len(old)
    return Prediction(spec(), target or spec(), dur, np.full(n, method, dtype=object),
                      np.full(n, reason, dtype=object))

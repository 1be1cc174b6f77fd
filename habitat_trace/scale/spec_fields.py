"""The keys a ``[gpus."NAME"]`` or ``[occupancy."X.Y"]`` table may hold, with their types, and the checks on one value.

Contract: ``check_value`` returns the value as the dataclass wants it or raises SpecError naming the file, the table
and the key. Used for the packaged catalog and for user ``--specs`` files alike; no ``assert`` on user input.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable, Mapping

from habitat_trace.errors import SpecError

STR, INT, NUM, STR_LIST, INT_LIST = "a string", "an integer", "a number", "a list of strings", "a list of integers"

TENSOR_DTYPES = ("tf32", "fp16", "bf16", "fp8", "fp32")  # fp32: matrix-core FP32 (AMD MFMA); NVIDIA has none

# Fields a GPU without `base` must give (everything GpuSpec needs that has no default).
REQUIRED_GPU_KEYS: Mapping[str, str] = {
    "architecture": STR, "compute_capability": STR, "sms": INT, "boost_clock_mhz": NUM, "memory_gib": NUM,
    "memory_bandwidth_gbs": NUM, "l2_cache_mib": NUM, "fp32_tflops": NUM, "tdp_w": NUM, "interconnect": STR,
    "source": STR,
}
OPTIONAL_GPU_KEYS: Mapping[str, str] = {
    **{f"{d}_tensor_tflops": NUM for d in TENSOR_DTYPES},
    "price_usd_per_hour": NUM, "price_provider": STR, "price_date": STR, "price_source": STR,
    "device_names": STR_LIST, "aliases": STR_LIST, "base": STR,
}
# Sourced facts the models do not read directly; they land in GpuSpec.extra.
EXTRA_GPU_KEYS: Mapping[str, str] = {
    "full_name": STR, "chip": STR, "form_factor": STR, "memory_type": STR, "fp32_lanes_per_sm": INT,
    "base_clock_mhz": NUM, "tensor_clock_mhz_implied": NUM, "memory_bus_bits": INT, "memory_usable_gib": NUM,
    "cpu_memory_gib": NUM, "fp64_tflops": NUM, "fp64_tensor_tflops": NUM, "fp16_nontensor_tflops": NUM,
    "fp16acc_tensor_tflops": NUM, "int8_tensor_tops": NUM, "fp4_tensor_tflops": NUM, "pcie_gen": INT,
    "nvlink_gbs": NUM, "nvlink_c2c_gbs": NUM, "infinity_cache_mib": NUM,
    # the usual multi-GPU node of the part (collective pricing, scale/collective.py)
    "nvlink_gen": INT, "node": STR, "node_gpus": INT, "node_network_gbps": NUM, "node_source": STR,
    # what large FP32 GEMMs sustain (power-limited clock, library efficiency) and where the number comes from
    "fp32_gemm_sustained_tflops": NUM, "fp32_gemm_sustained_source": STR,
    "dram_efficiency": NUM, "dram_efficiency_source": STR,
    # measured/published sustained figures for the cross-architecture model (issue 25), each with its source
    "tensor_sustained_tflops_fp16": NUM, "tensor_sustained_tflops_bf16": NUM, "tensor_sustained_tflops_tf32": NUM,
    "tensor_sustained_tflops_fp8": NUM, "tensor_sustained_source": STR,
    "memory_bandwidth_achievable_gbs": NUM, "memory_bandwidth_achievable_source": STR,
    "sm_clock_sustained_mhz": NUM, "sm_clock_sustained_source": STR,
}
GPU_KEYS: Mapping[str, str] = {**REQUIRED_GPU_KEYS, **OPTIONAL_GPU_KEYS, **EXTRA_GPU_KEYS}
PRICE_KEYS = ("price_usd_per_hour", "price_provider", "price_date")

OCCUPANCY_KEYS: Mapping[str, str] = {
    "warp_size": INT, "max_threads_per_block": INT, "max_threads_per_sm": INT, "max_warps_per_sm": INT,
    "max_blocks_per_sm": INT, "registers_per_sm": INT, "max_registers_per_block": INT,
    "max_registers_per_thread": INT, "register_alloc_unit": INT, "warp_alloc_granularity": INT,
    "shared_mem_per_sm_bytes": INT, "shared_mem_carveout_kib": INT_LIST, "shared_mem_per_block_optin_bytes": INT,
    "shared_mem_alloc_unit_bytes": INT, "reserved_shared_mem_per_block_bytes": INT, "source": STR,
}
# Zero is a real value for these (no reserved shared memory before cc 8.0; a 0 KiB carve-out).
ZERO_OK = {"reserved_shared_mem_per_block_bytes", "shared_mem_carveout_kib"}


def where(path: Path | str, table: str, name: str) -> str:
    return f'{path}: [{table}."{name}"]'


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def check_keys(table: Mapping[str, object], allowed: Mapping[str, str], at: str) -> None:
    for key in table:
        if key not in allowed:
            raise SpecError(f"{at} unknown key {key!r}{did_you_mean(key, allowed)}")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_value(key: str, value: object, kind: str, at: str) -> object:
    """Check one value's type (and positivity for numbers); return it as the dataclass wants it."""
    ok = {
        STR: lambda v: isinstance(v, str) and v.strip() != "",
        INT: _is_int,
        NUM: _is_num,
        STR_LIST: lambda v: isinstance(v, list) and all(isinstance(x, str) and x.strip() for x in v),
        INT_LIST: lambda v: isinstance(v, list) and all(_is_int(x) for x in v),
    }[kind](value)
    if not ok:
        hint = ' (write it as a string, e.g. "9.0")' if key == "compute_capability" else ""
        raise SpecError(f"{at}.{key} must be {kind}, got {value!r} ({type(value).__name__}){hint}")
    if kind in (INT, NUM) and key not in ZERO_OK and value <= 0:  # type: ignore[operator]
        raise SpecError(f"{at}.{key} must be > 0, got {value!r}")
    if kind == INT_LIST and any(x < 0 for x in value):  # type: ignore[attr-defined]
        raise SpecError(f"{at}.{key} must not hold negative numbers, got {value!r}")
    if kind == NUM:
        return float(value)  # type: ignore[arg-type]
    if kind in (STR_LIST, INT_LIST):
        return tuple(value)  # type: ignore[arg-type]
    return value

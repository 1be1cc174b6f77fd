"""``habitat-trace gpus``: the GPU catalog (with --specs entries) as a report: a row per GPU with every field of
its GpuSpec (json: the same objects as before, tuples as lists, mappings as objects) and the SM clock under load the
cross-chip law takes for it with its basis; the table shows the figures that compare GPUs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pandas as pd

from habitat_trace.commands.render import Column, Report, Table
from habitat_trace.scale.gpu import GpuSpec, spec_fields
from habitat_trace.scale.rates import clock_basis, rates
from habitat_trace.scale.specs import load_catalog


def _num(digits: int) -> Any:
    return lambda v: f"{v:,.{digits}f}"


SHOWN = (Column("name", "name", of=lambda r: r["name"] + (f" (base {r['base']})" if r.get("base") else ""), text=True),
         Column("architecture", "arch", text=True), Column("compute_capability", "cc"), Column("sms", "SMs", "d"),
         Column("boost_clock_mhz", "boost MHz", _num(0), drop=3),
         Column("clock_under_load_mhz", "load MHz", _num(0), drop=5), Column("tdp_w", "W", _num(0), drop=4),
         Column("memory_gib", "mem GiB", lambda v: f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"),
         Column("memory_bandwidth_gbs", "BW GB/s", _num(0)), Column("l2_cache_mib", "L2 MiB", _num(1), drop=2),
         Column("fp32_tflops", "FP32 TF", _num(1)),
         Column("bf16", "BF16 TF", _num(0), of=lambda r: (r.get("tensor_tflops") or {}).get("bf16")),
         Column("fp8", "FP8 TF", _num(0), of=lambda r: (r.get("tensor_tflops") or {}).get("fp8"), drop=1),
         Column("price", "$/h", ".2f", of=lambda r: (r.get("price") or {}).get("usd_per_hour")))


def spec_to_dict(spec: GpuSpec) -> dict[str, Any]:
    """Every field of a GpuSpec as plain JSON types (tuples become lists, mappings dicts), and the SM clock under load
    the cross-chip law takes for it with what sets it (scale/rates.py: a sourced figure, the power limit a catalogued
    matmul shows, or boost)."""
    out = spec_fields(spec)
    out["tensor_tflops"] = dict(spec.tensor_tflops)
    out["extra"] = dict(spec.extra)
    out["clock_under_load_mhz"] = rates(spec).clock_mhz
    out["clock_under_load_basis"] = clock_basis(spec)
    return out


def report(specs: Optional[Path]) -> Report:
    catalog = load_catalog(specs)
    rows = pd.DataFrame([spec_to_dict(s) for s in catalog.specs])
    return Report((Table("gpus", "GPU catalog (dense tensor peaks, FP32 accumulate; - = no such tensor path)", rows,
                         SHOWN),))

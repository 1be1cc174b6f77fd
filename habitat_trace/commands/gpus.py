"""``habitat-trace gpus``: the GPU catalog (with --specs entries) as a report: a row per GPU with every field of
its GpuSpec (json: the same objects as before, tuples as lists, mappings as objects); the table shows the figures
that compare GPUs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pandas as pd

from habitat_trace.commands.render import Column, Report, Table
from habitat_trace.scale.gpu import GpuSpec, spec_fields
from habitat_trace.scale.specs import load_catalog


def _num(digits: int) -> Any:
    return lambda v: f"{v:,.{digits}f}"


SHOWN = (Column("name", "name", of=lambda r: r["name"] + (f" (base {r['base']})" if r.get("base") else ""), text=True),
         Column("architecture", "arch", text=True), Column("compute_capability", "cc"), Column("sms", "SMs", "d"),
         Column("boost_clock_mhz", "boost MHz", _num(0), drop=3),
         Column("memory_gib", "mem GiB", lambda v: f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"),
         Column("memory_bandwidth_gbs", "BW GB/s", _num(0)), Column("l2_cache_mib", "L2 MiB", _num(1), drop=2),
         Column("fp32_tflops", "FP32 TF", _num(1)),
         Column("bf16", "BF16 TF", _num(0), of=lambda r: (r.get("tensor_tflops") or {}).get("bf16")),
         Column("fp8", "FP8 TF", _num(0), of=lambda r: (r.get("tensor_tflops") or {}).get("fp8"), drop=1),
         Column("price", "$/h", ".2f", of=lambda r: (r.get("price") or {}).get("usd_per_hour")))


def spec_to_dict(spec: GpuSpec) -> dict[str, Any]:
    """Every field of a GpuSpec as plain JSON types (tuples become lists, mappings dicts)."""
    out = spec_fields(spec)
    out["tensor_tflops"] = dict(spec.tensor_tflops)
    out["extra"] = dict(spec.extra)
    return out


def report(specs: Optional[Path]) -> Report:
    catalog = load_catalog(specs)
    rows = pd.DataFrame([spec_to_dict(s) for s in catalog.specs])
    return Report((Table("gpus", "GPU catalog (dense tensor peaks, FP32 accumulate; - = no such tensor path)", rows,
                         SHOWN),))

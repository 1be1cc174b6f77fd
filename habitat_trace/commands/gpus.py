"""`habitat-trace gpus`: list the GPU catalog (with --specs entries) as a table or as JSON on stdout.

JSON mode writes one JSON list (every field of every GpuSpec) and nothing else, so it can be piped.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Optional

from habitat_trace.errors import HabitatTraceError
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.specs import load_catalog

FORMATS = ("table", "json")


def run(specs: Optional[Path], fmt: str) -> None:
    if fmt not in FORMATS:
        raise HabitatTraceError(f"unknown --format {fmt!r}; use one of: {', '.join(FORMATS)}")
    catalog = load_catalog(specs)
    if fmt == "json":
        sys.stdout.write(json.dumps([spec_to_dict(s) for s in catalog.specs], indent=2) + "\n")
    else:
        _print_table(catalog.specs)


def spec_to_dict(spec: GpuSpec) -> dict:
    """Every field of a GpuSpec as plain JSON types (tuples become lists, mappings dicts)."""
    out = dataclasses.asdict(spec)
    out["tensor_tflops"] = dict(spec.tensor_tflops)
    out["extra"] = dict(spec.extra)
    return out


def _num(value: Optional[float], digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _print_table(specs: tuple[GpuSpec, ...]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="GPU catalog (dense tensor peaks, FP32 accumulate; - = no such tensor path)")
    for header in ("name", "arch", "cc", "SMs", "boost MHz", "mem GiB", "BW GB/s", "L2 MiB", "FP32 TF",
                   "BF16 TF", "FP8 TF", "$/h"):
        table.add_column(header, justify="left" if header in ("name", "arch") else "right", no_wrap=True)
    for s in specs:
        table.add_row(
            s.name + (f" (base {s.base})" if s.base else ""), s.architecture, s.compute_capability, str(s.sms),
            _num(s.boost_clock_mhz), _num(s.memory_gib, 0 if s.memory_gib == int(s.memory_gib) else 1),
            _num(s.memory_bandwidth_gbs), _num(s.l2_cache_mib, 1), _num(s.fp32_tflops, 1),
            _num(s.tensor_tflops.get("bf16"), 0), _num(s.tensor_tflops.get("fp8"), 0),
            "-" if s.price is None else f"{s.price.usd_per_hour:.2f}",
        )
    width = None if sys.stdout.isatty() else 200  # piped: do not squeeze the table to 80 columns
    Console(width=width).print(table)

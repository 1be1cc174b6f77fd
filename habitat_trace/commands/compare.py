"""``habitat-trace compare``: print ``habitat_trace.analysis.compare.compare`` as a rich table, JSON or CSV; plot it.

JSON and CSV go to stdout and nothing else does; the progress bar and notes go to stderr (table mode prints
the table and its notes on stdout).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

from habitat_trace.errors import HabitatTraceError

FORMATS = ("table", "json", "csv")
WIDTH = 160  # when piped: wide enough for the table (rich would use 80)


def parse_prices(prices: list[str]) -> dict[str, float]:
    """``["L4=0.7", "H100=2.5"]`` -> ``{"L4": 0.7, "H100": 2.5}``; one error line for a malformed entry."""
    out = {}
    for item in prices:
        name, sep, usd = item.partition("=")
        try:
            value = float(usd)
        except ValueError:
            value = float("nan")
        if not sep or not name.strip() or not math.isfinite(value) or value < 0:
            raise HabitatTraceError(f"--price {item!r}: write GPU=USD per hour, e.g. --price L4=0.80")
        out[name.strip()] = value
    return out


def run(trace: Path, to: str, specs: Optional[Path], prices: list[str], fmt: str, plot: Optional[Path],
        origin: Optional[str]) -> None:
    if fmt not in FORMATS:
        raise HabitatTraceError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    names = [n.strip() for n in to.split(",") if n.strip()]
    if not names:
        raise HabitatTraceError("--to: name at least one GPU, e.g. --to H100,A100,L4")
    overrides = parse_prices(prices)
    if plot is not None:
        from habitat_trace.commands.plot import check_plot_path

        check_plot_path(plot)
    table = _compute(trace, names, specs, overrides, origin)
    if plot is not None:
        from habitat_trace.commands.plot import plot_compare

        plot_compare(table, plot, title=Path(trace).name)
    if fmt == "json":
        sys.stdout.write(json.dumps(records(table), indent=2, allow_nan=False) + "\n")
    elif fmt == "csv":
        sys.stdout.write(to_csv(table))
    else:
        print_table(table)
    sys.stdout.flush()


def _compute(trace: Path, names: list[str], specs: Optional[Path], overrides: dict[str, float],
             origin: Optional[str]) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from habitat_trace.analysis.compare import compare
    from habitat_trace.ingest import load
    from habitat_trace.scale.specs import load_catalog

    for name in [*names, *overrides]:  # unknown GPU names fail before the trace is read
        load_catalog(specs).resolve(name)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"reading {Path(trace).name}", total=len(names) + 2)
        loaded = load(trace)
        bar.update(task, advance=1, description="predicting and replaying")

        def done(gpu: str) -> None:
            bar.update(task, advance=1, description=f"done {gpu}")

        return compare(loaded, names, specs=specs, prices=overrides, origin=origin, progress=done)


def records(table: Any) -> list[dict[str, Any]]:
    """Rows as plain JSON values in COLUMNS order; NaN/None become null."""
    from habitat_trace.analysis.compare import COLUMNS

    out = []
    for row in table.to_dict(orient="records"):
        rec = {}
        for c in COLUMNS:
            v = row[c]
            if hasattr(v, "item"):
                v = v.item()
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            rec[c] = {k: float(x) for k, x in v.items()} if isinstance(v, dict) else v
        out.append(rec)
    return out


def to_csv(table: Any) -> str:
    """CSV with a header; method_share as a JSON object in its cell; empty cells for null."""
    import csv
    import io

    from habitat_trace.analysis.compare import COLUMNS

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for rec in records(table):
        writer.writerow(["" if rec[c] is None else json.dumps(rec[c], sort_keys=True) if isinstance(rec[c], dict)
                         else rec[c] for c in COLUMNS])
    return buf.getvalue()


def _fmt(value: Optional[float], spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def _fits(value: Optional[bool]) -> str:
    return "?" if value is None else "yes" if value else "[red]no[/red]"


def print_table(table: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from habitat_trace.analysis.memory import CONTEXT_GIB, FRAGMENTATION_FACTOR

    rows = records(table)
    t = Table(title="predicted steady-state iteration per GPU (first row: origin, measured)", title_justify="left")
    for c in ("GPU", "iteration ms", "GPU busy ms", "speed-up", "bound", "$/h", "$ / 1k it", "peak GiB", "fits",
              "methods (share of GPU time)"):
        t.add_column(c, justify="left" if c in ("GPU", "bound", "fits", "methods (share of GPU time)") else "right")
    for i, r in enumerate(rows):
        methods = ", ".join(f"{k} {v:.0%}" for k, v in sorted(r["method_share"].items(), key=lambda kv: -kv[1]))
        t.add_row(r["gpu"] + (" (origin)" if i == 0 else ""), f"{r['iteration_ms']:.2f}", f"{r['gpu_busy_ms']:.2f}",
                  f"{r['speedup']:.2f}x", r["bound"], _fmt(r["usd_per_hour"], ".3f"),
                  _fmt(r["usd_per_1k_iterations"], ".4f"), _fmt(r["peak_memory_gib"], ".1f", "?"), _fits(r["fits_memory"]),
                  methods)
    console = Console(width=None if sys.stdout.isatty() else WIDTH)
    console.print(t)
    source = rows[0]["memory_source"] if rows else "estimate"
    how = {"trace": "recorded ([memory] events)", "estimate": "estimated from op shapes"}.get(
        source, "unknown (no [memory] events and no parameter gradient shapes: record with profile_memory=True)")
    console.print(f"peak memory: {how}; fits = peak x {FRAGMENTATION_FACTOR} + {CONTEXT_GIB:g} GiB <= the GPU's memory")
    prices = sorted({f"{r['gpu']}: {r['price_source']}" for r in rows if r["price_source"]})
    if prices:
        console.print("prices (on-demand, per GPU): " + "; ".join(prices), soft_wrap=True)

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
WIDE = 150  # narrower consoles (a terminal, or COLUMNS) get the short layout: no methods column, short headers


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


def run(trace: Path, to: list[str] | str, specs: Optional[Path], prices: list[str], fmt: str,
        plot: Optional[Path], origin: Optional[str], whatif: Optional[dict[str, Any]] = None,
        host: Optional[Any] = None) -> None:
    from habitat_trace.commands.common import target_names
    from habitat_trace.scale.specs import load_catalog

    if fmt not in FORMATS:
        raise HabitatTraceError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    names = target_names(to, load_catalog(specs))  # comma-separated, repeated or "all"; unknown names fail here
    if Path(trace).is_dir():  # one trace per rank: joint replay (commands/ranks.py)
        from habitat_trace.commands import ranks

        return ranks.compare(Path(trace), names, specs, origin, "json" if fmt == "json" else "table", whatif or {},
                             host)
    overrides = parse_prices(prices)
    if plot is not None:
        from habitat_trace.commands.plot import check_plot_path

        check_plot_path(plot)
    table = _compute(trace, names, specs, overrides, origin, host)
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
             origin: Optional[str], host: Optional[Any] = None) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from habitat_trace.analysis.compare import compare
    from habitat_trace.commands.common import quiet
    from habitat_trace.ingest import load
    from habitat_trace.scale.specs import load_catalog

    for name in [*names, *overrides]:  # unknown GPU names fail before the trace is read
        load_catalog(specs).resolve(name)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True, disable=quiet()) as bar:
        task = bar.add_task(f"reading {Path(trace).name}", total=len(names) + 2)
        loaded = load(trace)
        bar.update(task, advance=1, description="predicting and replaying")

        def done(gpu: str) -> None:
            bar.update(task, advance=1, description=f"done {gpu}")

        from habitat_trace import pipeline

        return compare(loaded, names, specs=specs, prices=overrides, origin=origin, progress=done,
                       host=host or pipeline.Host())


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
    import os

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from habitat_trace.analysis.memory import CONTEXT_GIB, FRAGMENTATION_FACTOR

    rows = records(table)
    console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else WIDTH)
    wide = console.width >= WIDE
    full = ("GPU", "iteration ms", "GPU busy ms", "speed-up", "bound", "$/h", "$ / 1k it", "peak GiB", "fits",
            "methods (share of GPU time)")
    # 80 columns: short headers, no methods and no $/h ($ / 1k it is the figure that compares), so that a GPU
    # name like "H100 SXM5 80GB" still fits on one line
    short = {"iteration ms": "iter ms", "GPU busy ms": "busy ms", "$ / 1k it": "$/1k it", "peak GiB": "GiB"}
    shown = full if wide else tuple(c for c in full if c not in ("$/h", "methods (share of GPU time)"))
    cells = []
    for i, r in enumerate(rows):
        methods = ", ".join(f"{k} {v:.0%}" for k, v in sorted(r["method_share"].items(), key=lambda kv: -kv[1]))
        gpu = r["gpu"] + (" (origin)" if i == 0 and wide else "")  # narrow: the title says the first row is it
        cell = dict(zip(full, (gpu, f"{r['iteration_ms']:.2f}", f"{r['gpu_busy_ms']:.2f}", f"{r['speedup']:.2f}x",
                               r["bound"], _fmt(r["usd_per_hour"], ".3f"), _fmt(r["usd_per_1k_iterations"], ".4f"),
                               _fmt(r["peak_memory_gib"], ".1f", "?"), _fits(r["fits_memory"]),
                               methods)))
        cells.append([cell[c] for c in shown])
    t = Table(title="steady-state iteration per GPU, without the profiler (first row: the origin)", title_justify="left",
              box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD, pad_edge=wide)
    for j, c in enumerate(shown):
        # every figure keeps its widest cell (80 columns cut "121.…"); only GPU names and methods fold
        text = c in ("GPU", "bound", "fits", full[-1])
        folds = c in ("GPU", full[-1])
        head = c if wide else short.get(c, c)
        t.add_column(head, justify="left" if text else "right", no_wrap=not folds, overflow="fold",
                     min_width=None if folds else max([len(head)] + [Text.from_markup(row[j]).cell_len
                                                                      for row in cells]))
    for row in cells:
        t.add_row(*row)
    console.print(t)
    source = rows[0]["memory_source"] if rows else "estimate"
    how = {"trace": "recorded ([memory] events)", "estimate": "estimated from op shapes"}.get(
        source, "unknown (no [memory] events and no parameter gradient shapes: record with profile_memory=True)")
    console.print(f"peak memory: {how}; fits = peak x {FRAGMENTATION_FACTOR} + {CONTEXT_GIB:g} GiB <= the GPU's memory")
    if not wide:
        console.print(f"Narrower than {WIDE} columns: the $/h and methods columns are left out (--format json or "
                      "csv has them)")
    prices = sorted({f"{r['gpu']}: {r['price_source']}" for r in rows if r["price_source"]})
    if prices:
        console.print("prices (on-demand, per GPU): " + "; ".join(prices), soft_wrap=True)

"""``habitat-trace explain``: print ``habitat_trace.analysis.explain.explain`` as rich tables or one JSON object on stdout."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from habitat_trace.errors import HabitatTraceError

FORMATS = ("table", "json")
WIDTH = 200  # when piped: room for op and kernel names
NAME_WIDTH = 70


def run(trace: Path, to: str, specs: Optional[Path], top: int, fmt: str, origin: Optional[str],
        whatif: Optional[dict[str, Any]] = None) -> None:
    if fmt not in FORMATS:
        raise HabitatTraceError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if Path(trace).is_dir():  # one trace per rank: transfer vs waiting per rank (commands/ranks.py)
        from habitat_trace.commands import ranks

        return ranks.explain(Path(trace), to, specs, origin, fmt, whatif or {})
    if top < 1:
        raise HabitatTraceError(f"--top {top}: give a positive number")
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from habitat_trace.analysis.explain import explain
    from habitat_trace.pipeline import resolve_origin
    from habitat_trace.ingest import load
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    target = catalog.resolve(to.strip())  # unknown names fail before the trace is read
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"reading {Path(trace).name}", total=None)
        loaded = load(trace)
        src = resolve_origin(loaded, catalog, origin)
        bar.update(task, description=f"predicting {src.name} -> {target.name}")
        result = explain(loaded, src, target, top=top)
    if fmt == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        print_tables(result)
    sys.stdout.flush()


def _short(name: str) -> str:
    name = name.replace("autograd::engine::evaluate_function: ", "")
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def print_tables(e: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else WIDTH)
    s = e["step"]
    console.print(f"[bold]{e['origin']} -> {e['target']}[/bold], per step (mean of {e['steps']}): iteration "
                  f"{s['iteration_ms'][0]:.2f} -> {s['iteration_ms'][1]:.2f} ms, GPU busy {s['gpu_busy_ms'][0]:.2f} "
                  f"-> {s['gpu_busy_ms'][1]:.2f} ms, GPU idle (launch-bound gaps) {s['gpu_idle_ms'][0]:.2f} -> "
                  f"{s['gpu_idle_ms'][1]:.2f} ms ({_pct(s['idle_share'][0])} -> {_pct(s['idle_share'][1])} of the step); "
                  f"profiler overhead removed: {e['profiler_overhead_ms']:.2f} ms per step")
    console.print(_table("ops (by top-level op) whose GPU time changes most", "op", e["ops"]))
    console.print(_table("kernels whose time changes most", "kernel", e["kernels"]))
    console.print("waves: time-weighted mean waves origin -> target; γ: share of the origin time the DRAM was busy "
                  "(memory-bound when >= 0.5); share: of the target's step; method: see docs/method.md")


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.0%}"


def _table(title: str, what: str, rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in (what, "n/step", "origin ms", "target ms", "change ms", "x", "waves", "γ", "bound", "method", "share"):
        t.add_column(c, justify="left" if c in (what, "bound", "method") else "right")
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        t.add_row(_short(r["name"]), f"{r['count_per_step']:g}", f"{r['origin_ms']:.3f}", f"{r['target_ms']:.3f}",
                  f"{r['change_ms']:+.3f}", ratio, f"{r['waves_origin']:.2f} -> {r['waves_target']:.2f}",
                  f"{r['gamma']:.2f}", r["bound"], r["method"] + (f" ({r['reason']})" if r["reason"] else ""),
                  f"{r['share']:.1%}")
    return t

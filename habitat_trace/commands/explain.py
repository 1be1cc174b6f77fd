"""``habitat-trace explain``: print ``habitat_trace.analysis.explain.explain`` as rich tables or JSON on stdout.

Several ``--to`` (comma-separated, or ``all``): one explanation per target, in order; JSON is then a list of
the objects one target prints. Below ``WIDE`` columns the tables drop waves, γ, bound and method (JSON has them)
so the numbers are never cut.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from habitat_trace.errors import HabitatTraceError

FORMATS = ("table", "json")
WIDTH = 200  # when piped: room for op and kernel names
NAME_WIDTH = 70
WIDE = 150  # columns the full table needs with 40-character names; narrower terminals get the short layout


def run(trace: Path, to: list[str] | str, specs: Optional[Path], top: int, fmt: str, origin: Optional[str],
        whatif: Optional[dict[str, Any]] = None, host: Optional[Any] = None) -> None:
    if fmt not in FORMATS:
        raise HabitatTraceError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if Path(trace).is_dir():  # one trace per rank: transfer vs waiting per rank (commands/ranks.py)
        from habitat_trace.commands import ranks

        return ranks.explain(Path(trace), to if isinstance(to, str) else ",".join(to), specs, origin, fmt,
                             whatif or {}, host)
    if top < 1:
        raise HabitatTraceError(f"--top {top}: give a positive number")
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from habitat_trace import pipeline
    from habitat_trace.commands.common import quiet, target_names
    from habitat_trace.analysis.explain import explain
    from habitat_trace.pipeline import resolve_origin
    from habitat_trace.ingest import load
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    targets = [catalog.resolve(n) for n in target_names(to, catalog)]  # unknown names fail before the trace is read
    results = []
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True, disable=quiet()) as bar:
        task = bar.add_task(f"reading {Path(trace).name}", total=None)
        loaded = load(trace)
        src = resolve_origin(loaded, catalog, origin)
        for target in targets:
            bar.update(task, description=f"predicting {src.name} -> {target.name}")
            results.append(explain(loaded, src, target, top=top, host=host or pipeline.Host()))
    if fmt == "json":
        sys.stdout.write(json.dumps(results[0] if len(results) == 1 else results, indent=2) + "\n")
    else:
        for result in results:
            print_tables(result)
    sys.stdout.flush()


def _short(name: str) -> str:
    name = name.replace("autograd::engine::evaluate_function: ", "")
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def _console() -> Any:
    """Terminal: its width; piped: ``WIDTH`` unless COLUMNS says otherwise."""
    import os

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else WIDTH)


def print_tables(e: dict[str, Any]) -> None:
    console = _console()
    wide = console.width >= WIDE
    s = e["step"]
    console.print(f"[bold]{e['origin']} -> {e['target']}[/bold], per step (mean of {e['steps']}): iteration "
                  f"{s['iteration_ms'][0]:.2f} -> {s['iteration_ms'][1]:.2f} ms, GPU busy {s['gpu_busy_ms'][0]:.2f} "
                  f"-> {s['gpu_busy_ms'][1]:.2f} ms, GPU idle (launch-bound gaps) {s['gpu_idle_ms'][0]:.2f} -> "
                  f"{s['gpu_idle_ms'][1]:.2f} ms ({_pct(s['idle_share'][0])} -> {_pct(s['idle_share'][1])} of the step); "
                  f"profiler overhead removed: {e['profiler_overhead_ms']:.2f} ms per step")
    console.print(_table("ops (by top-level op) whose GPU time changes most", "op", e["ops"], wide))
    console.print(_table("kernels whose time changes most", "kernel", e["kernels"], wide))
    if wide:
        console.print("waves: time-weighted mean waves origin -> target; γ: share of the origin time the DRAM was "
                      "busy (memory-bound when >= 0.5); share: of the target's step; method: see docs/method.md")
    else:
        console.print(f"share: of the target's step. Narrower than {WIDE} columns: waves, γ, bound and method "
                      "are left out (--format json has them)")


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.0%}"


def _table(title: str, what: str, rows: list[dict[str, Any]], wide: bool = True) -> Any:
    from rich import box
    from rich.table import Table

    full = (what, "n/step", "origin ms", "target ms", "change ms", "x", "waves", "γ", "bound", "method", "share")
    shown = full if wide else (what, "n/step", "origin ms", "target ms", "change ms", "x", "share")
    cells = []
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        cell = dict(zip(full, (_short(r["name"]), f"{r['count_per_step']:g}", f"{r['origin_ms']:.3f}",
                               f"{r['target_ms']:.3f}", f"{r['change_ms']:+.3f}", ratio,
                               f"{r['waves_origin']:.2f} -> {r['waves_target']:.2f}", f"{r['gamma']:.2f}", r["bound"],
                               r["method"] + (f" ({r['reason']})" if r["reason"] else ""), f"{r['share']:.1%}")))
        cells.append([cell[c] for c in shown])
    t = Table(title=title, title_justify="left", box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD, pad_edge=wide)
    for i, c in enumerate(shown):
        # numbers never wrap or shrink below their widest cell (an 80-column terminal cut "+68…"); names fold
        width = max([len(c)] + [len(row[i]) for row in cells])
        text = c in (what, "bound", "method")
        t.add_column(c, justify="left" if text else "right", no_wrap=not text or c == "bound",
                     min_width=None if text else width, overflow="fold")
    for row in cells:
        t.add_row(*row)
    return t

"""``habitat-trace inspect``: print ``ingest.report.summarize`` as rich tables or one JSON object on stdout."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from habitat_trace.errors import HabitatTraceError

FORMATS = ("table", "json")
WIDTH = 160  # when piped: wide enough for kernel and op names (rich would use 80)


def run(path: Path, fmt: str = "table", top: int = 10) -> None:
    if fmt not in FORMATS:
        raise HabitatTraceError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    from habitat_trace.commands.common import progress
    from habitat_trace.ingest import load
    from habitat_trace.analysis.report import summarize

    with progress(f"reading {Path(path).name}") as step:
        loaded = load(path)
        step("summarizing")
        summary = summarize(loaded, top=top)
    if fmt == "json":
        import orjson

        sys.stdout.buffer.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
        sys.stdout.buffer.write(b"\n")
        sys.stdout.flush()
    else:
        print_tables(summary)


def print_tables(s: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else WIDTH)
    o, f = s["origin"], s["format"]
    console.print(f"[bold]{s['file']}[/bold]")
    if s.get("prediction"):
        p = s["prediction"]
        console.print(f"[bold]a prediction[/bold] by habitat-trace {p['version']} for {p['target']} from a trace "
                      f"recorded on {p['origin']} ({p['input']}); its kernel times are predicted, not measured")
    console.print(f"{'GPU' if s.get('prediction') else 'origin GPU'}: {o['name'] or 'unknown (no deviceProperties)'}"
                  + (f", {o['sms']} SMs, cc {o['compute_capability']}" if o["sms"] else "")
                  + f"; devices {o['devices_in_trace']}, streams {s['kernels']['streams']}")
    console.print("format: " + ", ".join(f"{k}={v}" for k, v in f.items()))
    for table in (_steps_table(s), _class_table(s), _top_table(s), _coverage_table(s)):
        console.print(table)
    p = s["profiler_overhead"]
    measured = p["measured_unprofiled_step_ms"]
    console.print(f"profiler overhead (estimated): {p['mean_ms']:.2f} ms per step; the real loop's step ≈ CPU ms minus "
                  "it" + (f"; measured without the profiler: {measured:.2f} ms per step" if measured else "")
                  + " (docs/method.md, step 10)")
    for w in s["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {w}")


def _table(title: str, *columns: str) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i == 0 or c in ("class", "op", "kernel") else "right")
    return t


def _steps_table(s: dict[str, Any]) -> Any:
    st = s["steps"]
    title = "whole trace (no ProfilerStep: one pseudo-step)" if st["pseudo_step"] else f"{st['count']} steps"
    t = _table(title, "step", "CPU ms", "GPU busy ms", "GPU span ms", "kernels")
    for r in st["per_step"]:
        t.add_row(str(r["number"]) if r["number"] >= 0 else "-", f"{r['cpu_ms']:.3f}", f"{r['gpu_busy_ms']:.3f}",
                  f"{r['gpu_span_ms']:.3f}", str(r["kernels"]))
    m = st["mean"]
    t.add_row("mean", f"{m['cpu_ms']:.3f}", f"{m['gpu_busy_ms']:.3f}", f"{m['gpu_span_ms']:.3f}",
              f"{m['kernels']:.1f}", style="bold")
    return t


def _class_table(s: dict[str, Any]) -> Any:
    k = s["kernels"]
    t = _table(f"{k['count']} GPU events, {k['total_ms']:.3f} ms by class", "class", "count", "total ms", "share")
    for r in k["by_class"]:
        t.add_row(r["class"], str(r["count"]), f"{r['total_ms']:.3f}", f"{r['share']:.1%}")
    return t


def _top_table(s: dict[str, Any]) -> Any:
    t = _table("top kernels by total time", "kernel", "count", "total ms", "class", "op")
    for r in s["kernels"]["top"]:
        t.add_row(r["name"], str(r["count"]), f"{r['total_ms']:.3f}", r["class"], r["op"])
    return t


def _coverage_table(s: dict[str, Any]) -> Any:
    t = _table("fields present (fraction of kernels)", "field", "fraction")
    for k, v in s["coverage"].items():
        t.add_row(k, str(v) if k == "kernels" else f"{v:.1%}")
    return t

"""``habitat-trace validate PREDICTED MEASURED``: step, op and kernel errors of a prediction."""
from __future__ import annotations

from pathlib import Path

import typer

from habitat_trace.errors import HabitatTraceError


def run(predicted: Path, measured: Path, fmt: str, top: int) -> None:
    if fmt not in ("table", "json"):
        raise HabitatTraceError(f"--format {fmt!r}: use table or json")
    from habitat_trace.commands.common import warn
    from habitat_trace.ingest import load
    from habitat_trace.analysis.validate import validate

    report = validate(load(predicted), load(measured), top=top)
    for w in report["warnings"]:
        warn(w)
    if fmt == "json":
        import orjson

        typer.echo(orjson.dumps(report, option=orjson.OPT_SERIALIZE_NUMPY).decode())
        return
    _print(report)


def _print(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    c = Console()
    t = Table(title=f"per step (mean of {r['steps_compared']} steps)")
    for col in ("figure", "predicted ms", "measured ms", "error"):
        t.add_column(col, justify="right" if col != "figure" else "left")
    for k, v in r["step"].items():
        t.add_row(k, f"{v['predicted_ms']:.3f}", f"{v['measured_ms']:.3f}", f"{v['error_pct']:+.1f}%")
    c.print(t)
    it = r["iteration"]
    what = {"measured": "the real loop the trace carries", "estimated": "profiler overhead removed",
            "profiled": "profiled"}[it["measured_source"]]
    c.print(f"iteration: predicted {it['predicted_ms']:.3f} ms, measured {it['measured_ms']:.3f} ms ({what}), "
            f"error {it['error_pct']:+.1f}%")
    for what in ("ops", "kernels"):
        s = r[what]
        c.print(f"{what}: {s['matched']} matched, median |error| {s['median_abs_error_pct']:.1f}%, "
                f"time-weighted |error| {s['time_weighted_abs_error_pct']:.1f}%, total {s['total_error_pct']:+.1f}%")
        w = Table(title=f"worst {what} (largest time miss)")
        for col in ("name", "predicted µs", "measured µs", "error", "method"):
            w.add_column(col)
        for row in r[f"worst_{what}"]:
            w.add_row(str(row["name"])[:70], f"{row['predicted_ns'] / 1e3:.1f}", f"{row['measured_ns'] / 1e3:.1f}",
                      f"{row['error_pct']:+.1f}%", str(row.get("method", "")))
        c.print(w)

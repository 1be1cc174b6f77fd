"""``habitat-trace check TRACE``: Perfetto JSON-import rules (emit/check.py).

Prints each violation; exit 1 if any, else "ok: N events". For a habitat-trace output whose input
(``habitat_trace.input``) is still readable, violations the input already had are printed as
warnings and do not fail the check.
"""
from __future__ import annotations

from pathlib import Path

import typer

from habitat_trace.emit.check import check_events, compare
from habitat_trace.ingest.reader import read_document


def run(path: Path) -> None:
    doc = read_document(Path(path))
    events = doc["traceEvents"]
    source = (doc.get("habitat_trace") or {}).get("input") if isinstance(doc.get("habitat_trace"), dict) else None
    if source and Path(source).is_file():
        errors, warnings = compare(read_document(Path(source))["traceEvents"], events)
    else:
        errors, warnings = check_events(events), []
    for v in warnings:
        typer.echo(f"warning (also in the input): {v}")
    for v in errors:
        typer.echo(f"error: {v}")
    if errors:
        raise typer.Exit(1)
    typer.echo(f"ok: {len(events)} events" + (f" ({len(warnings)} warnings from the input)" if warnings else ""))

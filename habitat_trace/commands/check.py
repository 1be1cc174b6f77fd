"""``habitat-trace check TRACE``: Perfetto JSON-import rules (emit/check.py).

Prints each violation; exit 1 if any, else "ok: N events". For a habitat-trace output, violations its
input already had are printed as warnings and do not fail the check: the input is ``--input``, else the file
named by ``habitat_trace.input`` (a file name since issue 19; older outputs hold a path) looked up beside the
checked trace, so the check does not depend on where the command runs. A line on stderr says which.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from habitat_trace.emit.check import check_events, compare
from habitat_trace.ingest.reader import read_document


def run(path: Path, source: Optional[Path] = None) -> None:
    from habitat_trace.commands.common import note

    doc = read_document(Path(path))
    events = doc["traceEvents"]
    named = (doc.get("habitat_trace") or {}).get("input") if isinstance(doc.get("habitat_trace"), dict) else None
    if source is None and named:
        beside = Path(path).parent / Path(str(named)).name
        source = beside if beside.is_file() else None
        if source is None:
            note(f"note: the input {Path(str(named)).name} is not beside {Path(path).name}: every violation counts "
                 "(give the input with --input)", err=True)
    if source is not None:
        errors, warnings = compare(read_document(Path(source))["traceEvents"], events)
    else:
        errors, warnings = check_events(events), []
    for v in warnings:
        typer.echo(f"warning (also in the input): {v}")
    for v in errors:
        typer.echo(f"error: {v}")
    if errors:
        raise typer.Exit(1)
    note(f"ok: {len(events)} events" + (f" ({len(warnings)} warnings from the input)" if warnings else ""))

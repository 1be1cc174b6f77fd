"""``habitat-trace check TRACE``: Perfetto's JSON-import rules (ingest/rules.py) as a report: a row per violation.

Exit 1 when any violation is ours; else a note "ok: N events". For a habitat-trace output, the violations its
input already had do not fail the check (status "also in the input"): the output records them
(``habitat_trace.input_violations``), so the input is not needed; ``--input`` checks against a given input instead;
an older output without the record is checked against the file named by ``habitat_trace.input`` beside it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pandas as pd

from habitat_trace.commands.render import Column, Report, Table
from habitat_trace.ingest import rules
from habitat_trace.ingest.reader import read_document

SHOWN = (Column("event", "event", "d"), Column("rule", "rule", text=True), Column("status", "status", text=True),
         Column("message", "message", text=True))


def report(path: Path, source: Optional[Path] = None) -> tuple[Report, int]:
    """The report, and the number of violations that are ours (errors)."""
    from habitat_trace.commands.common import note

    doc = read_document(Path(path))
    events = doc["traceEvents"]
    block = doc.get("habitat_trace")
    header: dict[str, Any] = block if isinstance(block, dict) else {}
    known, how = _known(Path(path), source, header)
    if how:
        note(how, err=True)
    errors, warnings = rules.split(rules.check_events(events), known)
    rows = [_row(v, "error") for v in errors] + [_row(v, "also in the input") for v in warnings]
    frame = pd.DataFrame(sorted(rows, key=lambda r: (r["event"], r["rule"])),
                         columns=["event", "rule", "status", "message"])
    ok = f"ok: {len(events)} events" + (f" ({len(warnings)} warnings from the input)" if warnings else "")
    summary = ok if not errors else f"{len(errors)} violations of ours in {len(events)} events"
    return Report((Table("violations", "violations of Perfetto's JSON import rules", frame, SHOWN),),
                  notes=(summary,)), len(errors)


def _known(path: Path, source: Optional[Path], header: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The input's own violations (by rule), and a line saying where they came from when that is worth saying."""
    if source is not None:
        return rules.by_rule(rules.check_events(read_document(source)["traceEvents"])), ""
    recorded = header.get("input_violations")
    if isinstance(recorded, dict):
        return recorded, ""
    named = header.get("input")
    if not named:
        return {}, ""
    beside = path.parent / Path(str(named)).name
    if beside.is_file():
        return rules.by_rule(rules.check_events(read_document(beside)["traceEvents"])), ""
    return {}, (f"note: the input {Path(str(named)).name} is not beside {path.name}: every violation counts "
                "(give the input with --input)")


def _row(v: rules.Violation, status: str) -> dict[str, Any]:
    return {"event": v.index, "rule": v.rule, "status": status, "message": v.message}

"""``habitat-trace check TRACE``: Perfetto's JSON-import rules (ingest/rules.py) as a report: a row per violation.

Exit 1 when habitat-trace broke a rule; else a note "ok: N events". A habitat-trace output keeps every event of
its input at its index, so the violations its input already had are the input's (status "also in the input"),
not failures: the output records them (``habitat_trace.input_violations``), so the input is not needed;
``--input`` checks against a given input instead (it must be the trace the output was written from: its name, and
as many events); an older output without the record is checked against the file named by ``habitat_trace.input``
beside it. A trace habitat-trace did not write (no ``habitat_trace`` header, no ``--input``) broke no rule of ours:
its violations are listed as the recorded trace's own (an unmodified torch.profiler trace has one, Kineto's "Command
Buffer Full" at pid -1: issue 33, item 4).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pandas as pd

from habitat_trace.commands.render import Column, Report, Table
from habitat_trace.errors import UsageError
from habitat_trace.ingest import rules
from habitat_trace.ingest.reader import read_document

SHOWN = (Column("event", "event", "d"), Column("rule", "rule", text=True), Column("status", "status", text=True),
         Column("message", "message", text=True))
OURS, INPUTS, RECORDED = "error", "also in the input", "in the recorded trace"


def report(path: Path, source: Optional[Path] = None) -> tuple[Report, int]:
    """The report, and the number of violations that are ours (errors)."""
    from habitat_trace.commands.common import note

    doc = read_document(Path(path))
    events = doc["traceEvents"]
    block = doc.get("habitat_trace")
    header: dict[str, Any] = block if isinstance(block, dict) else {}
    found = rules.check_events(events)
    errors: list[rules.Violation] = []
    if not header and source is None:  # not an output of ours: every violation is the recording's
        warnings, status = found, RECORDED
    else:
        known, how = _known(Path(path), source, header, len(events))
        if how:
            note(how, err=True)
        (errors, warnings), status = rules.split(found, known), INPUTS
    rows = [_row(v, OURS) for v in errors] + [_row(v, status) for v in warnings]
    frame = pd.DataFrame(sorted(rows, key=lambda r: (r["event"], r["rule"])),
                         columns=["event", "rule", "status", "message"])
    whose = "from the input" if status == INPUTS else "the trace was recorded with"
    ok = f"ok: {len(events)} events" + (f" ({len(warnings)} violations {whose})" if warnings else "")
    summary = ok if not errors else f"{len(errors)} violations of ours in {len(events)} events"
    return Report((Table("violations", "violations of Perfetto's JSON import rules", frame, SHOWN),),
                  notes=(summary,)), len(errors)


def _known(path: Path, source: Optional[Path], header: dict[str, Any], events: int) -> tuple[dict[str, Any], str]:
    """The input's own violations (by rule), and a line saying where they came from when that is worth saying."""
    named = header.get("input")
    if source is not None:
        if named and Path(str(named)).name != Path(source).name:
            raise UsageError(f"--input {source}: {path.name} was written from {Path(str(named)).name}, not "
                             f"{Path(source).name}; give that trace, or drop --input (the output records its "
                             "input's violations)")
        theirs = read_document(source)["traceEvents"]
        if len(theirs) != events:
            raise UsageError(f"--input {source}: {len(theirs)} events, {path.name} {events}; an output keeps every "
                             "event of the trace it was written from: give that trace")
        return rules.by_rule(rules.check_events(theirs)), ""
    recorded = header.get("input_violations")
    if isinstance(recorded, dict):
        return recorded, ""
    if not named:
        return {}, ""
    beside = path.parent / Path(str(named)).name
    if beside.is_file():
        return rules.by_rule(rules.check_events(read_document(beside)["traceEvents"])), ""
    return {}, (f"note: the input {Path(str(named)).name} is not beside {path.name}: every violation counts "
                "(give the input with --input)")


def _row(v: rules.Violation, status: str) -> dict[str, Any]:
    return {"event": v.index, "rule": v.rule, "status": status, "message": v.message}

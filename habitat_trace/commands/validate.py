"""``habitat-trace validate PREDICTED MEASURED``: step, op and kernel errors of a prediction
(``analysis.validate``), as a report of four tables, and a fifth of the GPU work data parallelism adds on either side
(a scale-out prediction against one rank of the real run). Each side is a trace or a directory of one trace per
rank; ranks pair by number (a single trace is a run of one rank).
"""
from __future__ import annotations

from pathlib import Path

from habitat_trace.commands.render import Column, Report, Table
from habitat_trace.pipeline import Options

SOURCES = {"measured": "the real loop the trace carries", "estimated": "profiler overhead removed",
           "profiled": "profiled"}
STEPS = (Column("rank", "rank", "d", optional=True), Column("figure", "figure", text=True),
         Column("predicted_ms", "predicted ms", ".3f"), Column("measured_ms", "measured ms", ".3f"),
         Column("error_pct", "error", lambda v: f"{v:+.1f}%"),
         Column("measured_source", "measured as", lambda v: SOURCES.get(v, v), text=True, drop=1))
MATCHED = (Column("rank", "rank", "d", optional=True), Column("what", "what", text=True),
           Column("matched", "matched", "d"), Column("median_abs_error_pct", "median |error| %", ".1f"),
           Column("time_weighted_abs_error_pct", "time-weighted |error| %", ".1f", short="weighted %"),
           Column("total_error_pct", "total error %", "+.1f"))


ADDED = (Column("rank", "rank", "d", optional=True), Column("side", "side", text=True),
         Column("name", "op (data-parallel work, not paired)", lambda v: str(v)[:70], text=True),
         Column("count_per_step", "kernels/step", "g"), Column("gpu_ms", "GPU ms/step", ".3f"))


def _worst(what: str) -> tuple[Column, ...]:
    return (Column("rank", "rank", "d", optional=True), Column("name", what, lambda v: str(v)[:70], text=True),
            Column("predicted_ns", "predicted µs", lambda v: f"{v / 1e3:.1f}"),
            Column("measured_ns", "measured µs", lambda v: f"{v / 1e3:.1f}"),
            Column("error_pct", "error %", "+.1f"), Column("method", "method", text=True, drop=1))


def report(predicted: Path, measured: Path, options: Options, top: int = 10) -> Report:
    from habitat_trace.analysis.validate import validate_runs
    from habitat_trace.commands.common import finish, progress, read

    with progress(f"reading {Path(predicted).name} and {Path(measured).name}"):
        ([pred], p_unread, p_total), ([meas], m_unread, m_total) = (read(predicted, options, one=True),
                                                                    read(measured, options, one=True))
        v = validate_runs(pred, meas, top=top, partial=bool(p_unread or m_unread))
    n = int(v.steps["steps_compared"].iat[0])
    tables: tuple[Table, ...] = (
        Table("steps", f"per step (mean of {n} steps): predicted {Path(predicted).name}, measured "
                       f"{Path(measured).name}", v.steps, STEPS),
        Table("matched", "ops and kernels matched by name and order", v.matched, MATCHED),
        Table("worst_ops", "worst ops (largest time miss)", v.worst_ops, _worst("op")),
        Table("worst_kernels", "worst kernels (largest time miss)", v.worst_kernels, _worst("kernel")))
    if len(v.added):
        tables += (Table("added", "GPU work data parallelism adds (listed, not paired)", v.added, ADDED),)
    return finish(Report(tables, warnings=v.warnings), p_unread + m_unread, f"{predicted} and {measured}",
                  p_total + m_total)


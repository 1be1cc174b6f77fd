"""``habitat-trace validate PREDICTED MEASURED``: step, op and kernel errors of a prediction
(``analysis.validate``), as a report of four tables, and a fifth of the GPU work data parallelism adds on either side
(a scale-out prediction against one rank of the real run). Each side is a trace or a directory of one trace per
rank; ranks pair by number (a single trace is a run of one rank).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from habitat_trace.commands.render import Column, Report, Table
from habitat_trace.errors import HabitatTraceError
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
    from habitat_trace.analysis.validate import validate
    from habitat_trace.commands.common import progress
    from habitat_trace.pipeline import Run

    with progress(f"reading {Path(predicted).name} and {Path(measured).name}"):
        pred, meas = Run.open(predicted, options), Run.open(measured, options)
        pairs = _pairs(pred, meas)
        parts = [(rank, validate(p.tables, m.tables, options, top=top)) for rank, p, m in pairs]
    tables: dict[str, list[pd.DataFrame]] = {"steps": [], "matched": [], "worst_ops": [], "worst_kernels": [],
                                              "added": []}
    for rank, v in parts:
        for name in tables:
            frame = getattr(v, name)
            tables[name].append(frame.assign(rank=rank)[["rank", *frame.columns]])
    frames = {k: pd.concat(v, ignore_index=True) for k, v in tables.items()}
    n = int(frames["steps"]["steps_compared"].iat[0])
    return Report((Table("steps", f"per step (mean of {n} steps): predicted {Path(predicted).name}, measured "
                                  f"{Path(measured).name}", frames["steps"], STEPS),
                   Table("matched", "ops and kernels matched by name and order", frames["matched"], MATCHED),
                   Table("worst_ops", "worst ops (largest time miss)", frames["worst_ops"], _worst("op")),
                   Table("worst_kernels", "worst kernels (largest time miss)", frames["worst_kernels"],
                         _worst("kernel")))
                  + ((Table("added", "GPU work data parallelism adds (listed, not paired)", frames["added"], ADDED),)
                     if len(frames["added"]) else ()),
                  warnings=tuple(dict.fromkeys(w for _, v in parts for w in v.warnings)))


def _pairs(pred: Any, meas: Any) -> list[tuple[Any, Any, Any]]:
    """(rank, predicted rank, measured rank): the only ones of two single traces, else paired by rank number."""
    if pred.single and meas.single:
        return [(None, pred.ranks[0], meas.ranks[0])]
    p = {r.number: r for r in pred.ranks}
    m = {r.number: r for r in meas.ranks}
    if set(p) != set(m):
        raise HabitatTraceError(f"{pred.source} and {meas.source} hold other ranks ({sorted(p, key=str)} and "
                                f"{sorted(m, key=str)}); give the predicted and the measured traces of the same ranks")
    return [(k, p[k], m[k]) for k in sorted(p)]

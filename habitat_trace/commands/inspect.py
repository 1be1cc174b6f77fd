"""``habitat-trace inspect TRACE|DIR``: ``analysis.report.summarize`` of each trace as a report of tables: the
traces (GPU, format, counts), their steps, GPU time by kernel class, the top kernels, what the kernels carry,
and the profiler's overhead. A directory: every trace in it, a ``rank`` column when they are ranks of a run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from habitat_trace.commands.render import Column, Report, Table, range_cell
from habitat_trace.pipeline import Options

RANK = Column("rank", "rank", "d", optional=True)
FILE = Column("file", "file", text=True, optional=True)


def _prediction(p: Any) -> str:
    return f"a prediction for {p['target']} from {p['origin']} ({p['input']})"


TRACES = (Column("path", "file", lambda v: Path(v).name, text=True), RANK, Column("gpu", "GPU", text=True, missing="unknown"),
          Column("sms", "SMs", "d"), Column("compute_capability", "cc"), Column("kernels", "kernels", "d"),
          Column("gpu_events", "GPU events", "d", short="events"),
          Column("streams", "streams", lambda v: ",".join(map(str, v)), drop=2),
          Column("layout", "layout", text=True, drop=3),
          Column("prediction", "prediction", _prediction, text=True, optional=True))
STEPS = (FILE, RANK, Column("step", "step"), Column("cpu_ms", "CPU ms", ".3f"),
         Column("gpu_busy_ms", "GPU busy ms", ".3f"), Column("gpu_span_ms", "GPU span ms", ".3f"),
         Column("kernels", "kernels", "g"))
CLASSES = (FILE, RANK, Column("class", "class", text=True), Column("count", "count", "d"),
           Column("total_ms", "total ms", ".3f"), Column("share", "share", ".1%"))
TOP = (FILE, RANK, Column("name", "kernel", text=True), Column("count", "count", "d"),
       Column("total_ms", "total ms", ".3f"), Column("class", "class", text=True, drop=1),
       Column("op", "op", text=True, drop=2))
FIELDS = ("launch_params", "registers", "launch_call", "op", "input_dims", "step")
COVERAGE = (FILE, RANK, Column("kernels", "kernels", "d"), *(Column(f, f.replace("_", " "), ".1%") for f in FIELDS))
OVERHEAD = (FILE, RANK, Column("mean_ms", "estimated ms per step", ".2f", short="est. ms"),
            Column("origin_step_ms", "origin step ms", ".2f", short="step ms", missing="?"),
            Column("origin_step_low_ms", "range ms", of=lambda r: range_cell(r, "origin_step"), short="range"),
            Column("measured_unprofiled_step_ms", "measured un-profiled step ms", ".2f", short="measured ms",
                   optional=True),
            Column("host_unit_ns", "host unit ns", ".0f", drop=1))


def report(path: Path, options: Options, top: int = 10) -> Report:
    """Every trace of ``path``: a file, or a directory's runs (pipeline.run.Run.read), rank after rank, each run's
    origin step from its own replay (a directory's ranks jointly, as compare does)."""
    from habitat_trace.api import Trace
    from habitat_trace.commands.common import finish, progress, read

    summaries = []
    with progress(f"reading {Path(path).name}") as step:
        runs, unread, total = read(path, options)
        for run in runs:
            step(f"replaying {', '.join(r.path.name for r in run.ranks)}")
            summaries += [(rank.path.name if total > 1 else None, rank.number, s)
                          for rank, s in zip(run.ranks, Trace(run).inspect(top))]
    summaries.sort(key=lambda s: (s[1] is None, s[1] or 0, s[0] or ""))
    return finish(Report(tuple(_tables(summaries)), notes=(
        "profiler overhead: the profiler's own host time per step, removed from every prediction (docs/method.md, "
        "step 10); origin step: the real loop's step without it, as compare's first row reports it (never below "
        "what the trace proves; range: the host's pace the trace cannot tell)",),
        warnings=tuple(f"{name}: {w}" if name else w for name, _, s in summaries for w in s["warnings"])),
        unread, path, total)


def _tables(summaries: list[tuple[Any, Any, dict[str, Any]]]) -> list[Table]:
    def rows(part: Any) -> pd.DataFrame:  # object columns: an int stays an int beside a mean or a null (issue 33)
        return pd.DataFrame([{"file": name, "rank": rank, **r} for name, rank, s in summaries for r in part(s)],
                            dtype=object)

    n = summaries[0][2]["steps"]
    steps_title = "whole trace (no ProfilerStep: one pseudo-step)" if n["pseudo_step"] else f"{n['count']} steps"
    return [Table("traces", "traces", rows(lambda s: [_trace_row(s)]), TRACES),
            Table("steps", steps_title, rows(_step_rows), STEPS),
            Table("classes", "GPU events by class (time)", rows(lambda s: s["kernels"]["by_class"]), CLASSES),
            Table("top_kernels", "top kernels by total time", rows(lambda s: s["kernels"]["top"]), TOP),
            Table("coverage", "fields present (fraction of kernels)", rows(lambda s: [s["coverage"]]), COVERAGE),
            Table("profiler_overhead", "profiler overhead", rows(lambda s: [s["profiler_overhead"]]), OVERHEAD)]


def _trace_row(s: dict[str, Any]) -> dict[str, Any]:
    o, f, k = s["origin"], s["format"], s["kernels"]
    return {"path": s["file"], "gpu": o["name"], "sms": o["sms"], "compute_capability": o["compute_capability"],
            "memory_bytes": o["memory_bytes"], "devices": o["devices_in_trace"], "streams": k["streams"],
            "kernels": s["coverage"]["kernels"], "gpu_events": k["count"], "gpu_ms": k["total_ms"],
            **{key: v for key, v in f.items()}, "prediction": s["prediction"]}


def _step_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    st = s["steps"]
    per_step = [{"step": r["number"] if r["number"] >= 0 else None, **{k: v for k, v in r.items() if k != "number"}}
                for r in st["per_step"]]
    return per_step + [{"step": "mean", **st["mean"]}]

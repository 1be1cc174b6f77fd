"""``habitat-trace scale TRACE|DIR --to GPU[,GPU] -o OUT``: write each trace as it would run on each target; one
report (a row per trace and target) on stdout.

A file is a run of one rank; a directory's traces of one distributed run (distributedInfo) are one run, replayed
jointly, and every other trace there is a run of its own (pipeline.run.group_ranks). Outputs: one trace and one
``--to``: OUT is the file (gzip when it ends in .gz), ``-`` for stdout (plain JSON; the report then goes to stderr),
or an existing directory; several traces or targets, or OUT ending in ``/``: OUT must be an existing directory
(nothing is created, so a typo cannot scatter files) and each output is ``<stem>.<gpu-slug>.pt.trace.json.gz``
(TensorBoard lists them as workers). A directory's report is also written to OUT/summary.json. ``--jobs N`` runs
N processes (commands/batch.py); Ctrl-C stops every one at once and the report lists what was written.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from habitat_trace.commands.common import ReportedError
from habitat_trace.commands.render import Column, Report, Table, range_cell, to_json
from habitat_trace.errors import HabitatTraceError, OutputError, UsageError
from habitat_trace.pipeline import Options
from habitat_trace.pipeline.document import output_name
from habitat_trace.pipeline.run import REPORT_NAME
from habitat_trace.scale.gpu import GpuSpec

STDOUT = "-"
ROW_COLUMNS = ("trace", "rank", "origin", "target", "origin_iteration_ms", "origin_iteration_low_ms",
               "origin_iteration_high_ms", "iteration_ms", "iteration_low_ms", "iteration_high_ms", "range_source",
               "speedup", "gpu_busy_ms", "methods", "warnings", "output", "error")
SHOWN = (Column("trace", "trace", text=True), Column("rank", "rank", "d", optional=True),
         Column("target", "target", text=True), Column("origin_iteration_ms", "origin it. ms", ".2f", short="orig ms"),
         Column("iteration_ms", "target it. ms", ".2f", short="target ms"),
         Column("iteration_low_ms", "target range ms", short="range", of=range_cell, drop=4),
         Column("speedup", "speed-up", lambda v: f"{v:.2f}x"), Column("output", "wrote", text=True, drop=2),
         Column("warnings", "warnings", lambda v: "; ".join(v), text=True, drop=3, optional=True),
         Column("error", "error", text=True, optional=True))


def output_paths(files: list[Path], out: str, targets: list[GpuSpec]) -> dict[tuple[Path, str], Path]:
    """Where each (trace, target) goes (module doc); one error line, before any work, for an OUT that cannot be."""
    if out == STDOUT:
        if len(files) * len(targets) > 1:
            raise OutputError("-o - writes one trace to stdout; for several traces or --to give an existing "
                              "directory")
        return {(files[0], targets[0].name): Path(STDOUT)}
    path = Path(out)
    as_dir = len(files) * len(targets) > 1 or out.endswith((os.sep, "/")) or path.is_dir()
    if as_dir and not path.is_dir():
        why = "ends in /" if out.endswith((os.sep, "/")) else "is for several traces or --to"
        raise OutputError(f"{out}: -o {why}, so it must be an existing directory; create it first")
    if not as_dir:
        return {(files[0], targets[0].name): path}
    return {(f, t.name): path / output_name(f, t) for f in files for t in targets}


# ``--jobs`` left out: two processes where the work is one trace or more to at least AUTO_TARGETS GPUs each, no run
# of several ranks, and two CPUs are free (forking.second_cpu_free), else one. Each process then has its own
# write-behind thread: scale --to all (53 targets) of the shared ResNet-50 trace took 3.12 s in two processes against
# 3.67 s in one, 2.49x and 2.95x one target's time (benchmarks/perf.py --suite all, 2-core machine, 2026-11-28 04:56);
# a short list of targets does not repay the second process's start (its imports and its own read of the trace)
AUTO_TARGETS = 32


def auto_jobs(runs: list[list[Path]], targets: list[GpuSpec], options: Options, dask: Optional[str]) -> int:
    """The processes ``scale`` runs in when ``--jobs`` is left out (AUTO_TARGETS): 2 where memory allows it too
    (pipeline.jobs.plan_jobs, without its note), else 1."""
    from habitat_trace import forking
    from habitat_trace.pipeline.jobs import plan_jobs, uncompressed_size

    if (dask or options.data_parallel.active or len(targets) < AUTO_TARGETS or any(len(run) != 1 for run in runs)
            or not forking.second_cpu_free()):
        return 1
    return plan_jobs([sum(uncompressed_size(f) for f in run) for run in runs], 2, len(runs) * len(targets))[0]


def report(trace: Path, to: list[str], out: str, options: Options, jobs: Optional[int] = 1,
           dask: Optional[str] = None) -> Report:
    """Scale every run of ``trace`` to every target (module doc); the report of what was written. ``jobs`` None:
    ``auto_jobs``."""
    from habitat_trace.commands import batch
    from habitat_trace.emit.writer import check_output
    from habitat_trace.pipeline.run import runs_in

    targets = options.targets(to)  # unknown names fail before any work
    runs = runs_in(Path(trace))
    if jobs is None:
        jobs = auto_jobs([list(run) for run in runs], targets, options, dask)
    files = [f for run in runs for f in run]
    if dask and (options.data_parallel.active or all(len(run) == 1 for run in runs)):
        raise UsageError(f"--dask {dask}: {trace} holds no run of several ranks, the only work scale runs on a Dask "
                         "cluster; drop --dask (--jobs N runs independent traces in N processes)")
    paths = output_paths(files, out, targets)
    for p in paths.values():
        check_output(p, tuple(files))
    rows = batch.execute(runs, targets, options, paths, jobs, one_file=not Path(trace).is_dir(), dask=dask)
    result = outputs_report(rows)
    if Path(trace).is_dir():
        from habitat_trace.emit.writer import write_bytes

        write_bytes((to_json(result) + "\n").encode(), Path(out) / REPORT_NAME)
    failed = [r for r in rows if r.get("error")]
    if failed:  # commands/common.py: one rule for a directory with traces that fail
        raise ReportedError(result, f"{trace}: {len({r['trace'] for r in failed})} of {len(files)} traces failed "
                                    f"(see the report; first: {failed[0]['trace']}: {failed[0]['error']})",
                            failed[0].get("exit_code", HabitatTraceError.exit_code))
    return result


def outputs_report(rows: list[dict[str, Any]]) -> Report:
    """A row per trace and target, and the slowest trace per target (printed as a table for several traces)."""
    frame = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    tables = [Table("outputs", "written: one trace per input and target (iteration per step, without the profiler)",
                    frame, SHOWN),
              Table("slowest", "the slowest trace per target", slowest(frame),
                    (Column("target", "target", text=True), Column("trace", "slowest trace", text=True),
                     Column("rank", "rank", "d", optional=True), Column("origin_iteration_ms", "origin it. ms", ".2f"),
                     Column("iteration_ms", "target it. ms", ".2f")),
                    printed=frame["trace"].nunique() > 1)]
    warnings = tuple(dict.fromkeys(f"{r['target']}: {w}" for r in rows for w in (r.get("warnings") or [])))
    return Report(tuple(tables), warnings=warnings)


def slowest(frame: pd.DataFrame) -> pd.DataFrame:
    ok = frame[frame["error"].isna() & frame["iteration_ms"].notna()]
    if not len(ok):
        return pd.DataFrame(columns=["target", "trace", "rank", "origin_iteration_ms", "iteration_ms"])
    idx = ok.groupby("target", sort=False)["iteration_ms"].idxmax()
    return ok.loc[idx, ["target", "trace", "rank", "origin_iteration_ms", "iteration_ms"]].reset_index(drop=True)

"""``habitat-trace explain``: ``analysis.explain.explain`` as a report of three tables, whatever the number of
targets and ranks: the step per rank before and after, and the ops and kernels that change most (of the rank that
sets the step); with ``--world-size N`` a fourth, where the N-rank step's time goes. JSON is always the object
{"steps": [...], "ops": [...], "kernels": [...], "warnings": [...]}, with "scale_out": [...] for ``--world-size``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from habitat_trace.commands.render import Column, Report, Table, range_cell
from habitat_trace.pipeline import Options

NAME_WIDTH = 70


def _short(name: str) -> str:
    name = name.replace("autograd::engine::evaluate_function: ", "")
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def _pair(key: str, spec: str) -> Callable[[dict[str, Any]], Optional[str]]:
    """origin -> target of one figure, e.g. "1.23 -> 4.56" (null when the run has no such figure)."""
    def cell(r: dict[str, Any]) -> Optional[str]:
        a, b = r.get(f"origin_{key}"), r.get(key)
        return None if a is None or b is None else f"{format(a, spec)} -> {format(b, spec)}"
    return cell


def _range_pair(r: dict[str, Any]) -> Optional[str]:
    """origin -> target of the iteration's range (render.range_cell; "-" for a point); null when both are points."""
    a, b = range_cell(r, "origin_iteration"), range_cell(r, "iteration")
    return None if a is None and b is None else f"{a or '-'} -> {b or '-'}"


def _waves(r: dict[str, Any]) -> Optional[str]:
    """origin -> target waves; null for a row no wave law made (analysis.kernels.NO_WAVES)."""
    a, b = r.get("waves_origin"), r.get("waves_target")
    return None if a is None or b is None else f"{a:.2f} -> {b:.2f}"


def _step_columns(several: bool) -> tuple[Column, ...]:
    target = (Column("target", "GPU", text=True),) if several else ()
    return target + (
        Column("rank", "rank", "d", optional=True),
        Column("iteration_ms", "iteration ms", of=_pair("iteration_ms", ".2f"), short="iter ms"),
        Column("iteration_low_ms", "iteration range ms", of=_range_pair, short="range", drop=3),
        Column("gpu_busy_ms", "GPU busy ms", of=_pair("gpu_busy_ms", ".2f"), short="busy ms"),
        Column("gpu_idle_ms", "GPU idle ms", of=_pair("gpu_idle_ms", ".2f"), short="idle ms"),
        Column("idle_share", "idle share", of=_pair("idle_share", ".0%"), short="idle", drop=1),
        Column("transfer_ms", "collective transfer ms", of=_pair("transfer_ms", ".2f"), short="xfer ms",
               optional=True),
        Column("wait_ms", "wait on ranks ms", of=_pair("wait_ms", ".2f"), short="wait ms", optional=True),
        Column("profiler_overhead_ms", "profiler overhead removed ms", ".2f", short="overhead ms", drop=2),
    )


def _change_columns(what: str, several: bool) -> tuple[Column, ...]:
    target = (Column("target", "GPU", text=True),) if several else ()
    return target + (
        Column("rank", "rank", "d", optional=True),
        Column("name", what, _short, text=True),
        Column("count_per_step", "n/step", "g"),
        Column("origin_ms", "origin ms", ".3f"),
        Column("target_ms", "target ms", ".3f"),
        Column("change_ms", "change ms", "+.3f"),
        Column("ratio", "x", ".2f"),
        Column("waves", "waves", of=_waves, drop=3),
        Column("gamma", "γ", ".2f", drop=3),
        Column("bound", "bound", text=True, drop=2),
        Column("method", "method", of=lambda r: r["method"] + (f" ({r['reason']})" if r["reason"] else ""),
               text=True, drop=4),
        Column("share", "share", ".1%"),
    )


SCALE_OUT_COLUMNS = (
    Column("target", "GPU", text=True),
    Column("one_gpu_ms", "one GPU ms", ".2f"),
    Column("communication_ms", "+ communication exposed ms", "+.2f", short="+ comm ms"),
    Column("host_work_ms", "+ host work added ms", "+.2f", short="+ host ms"),
    Column("interference_ms", "+ compute interference ms", "+.2f", short="+ interference ms"),
    Column("iteration_ms", "= N ranks ms", ".2f", short="= ms"),
)


def report(trace: Path, to: Sequence[str], options: Options, top: int = 15) -> Report:
    from habitat_trace.api import Trace
    from habitat_trace.commands.common import finish, progress, read

    targets = options.targets(to)  # unknown names fail before the trace is read
    with progress(f"reading {Path(trace).name}") as step:
        [run], unread, total = read(trace, options, one=True)
        step(f"predicting {len(targets)} GPUs")
        e = Trace(run).explain(to, top=top)
    several = len(targets) > 1
    steps = e.steps.iloc[0]
    title = (f"{steps['origin']} -> {', '.join(t.name for t in targets)}, per step (mean of {steps['steps']}), "
             "origin -> target")
    tables: tuple[Table, ...] = (
        Table("steps", title, e.steps, _step_columns(several)),
        Table("ops", "ops (by top-level op) whose GPU time changes most", e.ops, _change_columns("op", several)),
        Table("kernels", "kernels whose time changes most", e.kernels, _change_columns("kernel", several)))
    if len(e.scale_out):
        dp = options.data_parallel
        tables += (Table("scale_out", f"where the {dp.world_size}-rank {dp.strategy.upper()} step's time goes, per "
                         "step: the one-GPU step on the target and what the scale-out adds (they sum to it)",
                         e.scale_out, SCALE_OUT_COLUMNS),)
    notes = ("waves: time-weighted mean waves origin -> target; γ: share of the origin time the DRAM was busy "
             "(memory-bound when >= 0.5); share: of the target's step; method: see docs/method.md",)
    return finish(Report(tables, notes=notes, warnings=e.warnings), unread, trace, total)

"""``habitat-trace compare``: ``analysis.compare.gpu_table`` as a report (one row per GPU, the origin first), for
a trace or a directory of ranks alike; ``--plot`` draws it (commands/plot.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from habitat_trace.commands.render import Column, Report, Table, range_cell
from habitat_trace.errors import UsageError
from habitat_trace.pipeline import Options


def _methods(share: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.0%}" for k, v in sorted(share.items(), key=lambda kv: -kv[1]))


# The table; json and csv have every column of analysis.compare.COLUMNS. Narrow terminals lose the methods and
# $/h first ($ / 1k it is the figure that compares), so that a GPU name like "H100 SXM5 80GB" still fits.
SHOWN = (
    Column("gpu", "GPU", of=lambda r: r["gpu"] + (" (origin)" if r["origin"] else "")
           + (f" (what-if: {r['whatif']})" if r.get("whatif") else ""), text=True),
    Column("iteration_ms", "iteration ms", ".2f", short="iter ms"),
    Column("iteration_low_ms", "range ms", short="range", of=range_cell, drop=1),
    Column("gpu_busy_ms", "GPU busy ms", ".2f", short="busy ms"),
    Column("speedup", "speed-up", lambda v: f"{v:.2f}x"),
    Column("bound", "bound", text=True),
    Column("slowest_rank", "slowest rank", "d", short="rank", optional=True),
    Column("transfer_ms", "collective transfer ms", ".2f", short="xfer ms", optional=True),
    Column("wait_ms", "wait on ranks ms", ".2f", short="wait ms", optional=True),
    Column("comm_ms", "comm ms", ".2f", optional=True),  # --world-size N: the synthesized collectives
    Column("exposed_comm_ms", "exposed comm ms", ".2f", short="exposed ms", optional=True),
    Column("usd_per_hour", "$/h", ".3f", drop=2),
    Column("usd_per_1k_iterations", "$ / 1k it", ".4f", short="$/1k it"),
    Column("peak_memory_gib", "peak GiB", ".1f", short="GiB", missing="?"),
    Column("fits_memory", "fits", lambda v: "yes" if v else "no", missing="?", text=True),
    Column("method_share", "methods (share of GPU time)", _methods, text=True, drop=3),
)


def report(trace: Path, to: Sequence[str], options: Options, prices: Sequence[str] = (),
           plot: Optional[Path] = None, jobs: int = 1, dask: Optional[str] = None) -> Report:
    from habitat_trace.api import Trace
    from habitat_trace.commands.common import finish, progress, read
    from habitat_trace.pipeline.fanout import rank_files

    targets = options.targets(to)  # unknown names (and prices' GPUs) fail before the trace is read
    overrides = options.prices(prices)
    if plot is not None:
        from habitat_trace.commands.plot import check_plot_path

        check_plot_path(plot)
    # the ranks of a run: one rank's tables in a process at a time (pipeline/fanout.py), on --jobs or --dask
    files = [] if options.data_parallel.active else rank_files(Path(trace))
    if dask and not files:
        raise UsageError(f"--dask {dask}: {trace} is not a directory of the ranks of one run, the only work compare "
                         "runs on a Dask cluster; drop --dask")
    if jobs > 1 and not files:
        raise UsageError(f"--jobs {jobs}: {trace} is not a directory of the ranks of one run, the only work compare "
                         "spreads over processes (one trace is predicted in this one); drop --jobs")
    with progress(f"reading {Path(trace).name}") as step:
        unread: list[Any] = []
        if files:
            table, total = _fanned(files, options, to, overrides, jobs, dask, step), len(files)
        else:
            [run], unread, total = read(trace, options, one=True)
            step("predicting and replaying")
            table = Trace(run).compare(to, overrides, progress=lambda gpu: step(f"done {gpu}"))
    first = table.iloc[0]
    title, what = "steady-state iteration per GPU, without the profiler (first row: the origin)", ""
    if "world_size" in table:  # a scale-out's rows say it (analysis.compare.SCALEOUT_COLUMNS)
        what = f"one of {first['world_size']} {first['strategy'].upper()} ranks"
        title = (f"steady-state iteration of {what} per GPU, synthesized from the one-GPU trace, without the profiler "
                 "(first row: the origin GPU)")
    if first["ranks"] > 1:
        what = f"the slowest of {first['ranks']} ranks"
        title = (f"steady-state iteration of {what} per GPU (joint replay), without the profiler (first row: the "
                 "origin)")
    if plot is not None:
        from habitat_trace.commands.plot import plot_compare

        plot_compare(table, plot, title=Path(trace).name + (f": {what}" if what else ""))
    rows = table.to_dict(orient="records")
    warnings = tuple(dict.fromkeys(f"{r['gpu']}: {w}" for r in rows for w in r["warnings"]))
    held = held_clocks(targets, {r["gpu"] for r in rows[1:]})
    return finish(Report((Table("compare", title, table, SHOWN),), notes=notes(rows) + held, warnings=warnings),
                  unread, trace, total)


def held_clocks(targets: Sequence[Any], shown: set[str]) -> tuple[str, ...]:
    """One note naming the targets the cross-chip law runs below their boost clock under load (scale/rates.py: a
    sourced clock, or the power limit a catalogued matmul shows), so a slow row of a cheap card says why."""
    from habitat_trace.scale.rates import rates

    clocks = [(s.name, rates(s).clock_mhz, s.boost_clock_mhz) for s in targets
              if s.name in shown and s.vendor == "nvidia"]
    held = [(n, c, b) for n, c, b in clocks if c < b - 0.5]
    if not held:
        return ()
    return ("clock under load below boost, the power limit (`habitat-trace gpus` says why): "
            + ", ".join(f"{n} {c:.0f}/{b:.0f} MHz" for n, c, b in held),)


def _fanned(files: list[Path], options: Options, to: Sequence[str], prices: dict[str, float], jobs: int,
            dask: Optional[str], step: Any) -> Any:
    """analysis.compare.ranks_table on the pool of ``jobs`` processes or the Dask cluster at ``dask``."""
    from habitat_trace.analysis.compare import ranks_table
    from habitat_trace.pipeline.fanout import open_pool

    with open_pool(files, jobs, dask) as pool:
        return ranks_table(files, options, options.targets(to), pool, prices, progress=lambda gpu: step(f"done {gpu}"))


# Exposed communication under this share of the step: the step hides it, and the table says so (issue 31: DDP's 2-
# and 4-rank predictions were identical to 0.01% with nothing saying why)
HIDDEN_SHARE = 0.01


def notes(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    from habitat_trace.analysis.compare import anchor_note
    from habitat_trace.analysis.memory import CONTEXT_GIB, FRAGMENTATION_FACTOR

    source = rows[0]["memory_source"] if rows else "estimate"
    how = {"trace": "recorded ([memory] events)", "estimate": "estimated from op shapes"}.get(
        source, "unknown (no [memory] events, and parameters no gradient shows, or none: record with "
        "profile_memory=True)")
    out = [f"peak memory: {how}; fits = peak x {FRAGMENTATION_FACTOR} + {CONTEXT_GIB:g} GiB <= the GPU's memory"]
    gpus = rows[0].get("world_size") or rows[0]["ranks"] if rows else 1
    if gpus > 1:
        out.append(f"$ / 1k it: for all {gpus} GPUs of the run (one per rank)")
    if rows and rows[0].get("world_size"):
        out.append("comm ms: GPU time of the synthesized collectives per step; exposed: the part no compute overlaps "
                   "(docs/distributed.md, 'Scale-out from one GPU': what is assumed)")
        hidden = [r["gpu"] for r in rows if r.get("comm_ms") and r.get("exposed_comm_ms") is not None
                  and r["exposed_comm_ms"] <= HIDDEN_SHARE * r["iteration_ms"]]
        if hidden:
            out.append(f"communication hidden on {', '.join(hidden)}: the collectives overlap the compute (exposed < "
                       f"{HIDDEN_SHARE:.0%} of the step), so more ranks move these rows only by the longer collectives' "
                       "contention and host work; `explain --world-size` splits the step")
    out += [n for n in [anchor_note(rows[0]) if rows else None] if n]
    # a GPU without a catalogued price has no source (NaN in the table): it is left out, not written "nan"
    prices = sorted({f"{r['gpu']}: {r['price_source']}" for r in rows if isinstance(r["price_source"], str)
                     and r["price_source"]})
    if prices:
        out.append("prices (on-demand, per GPU): " + "; ".join(prices))
    return tuple(out)

"""``habitat-trace scale DIR --to X -o OUT/ --jobs N``: every trace of a directory scaled in a process pool.

Memory-bounded: a worker's peak is about ``PEAK_PER_BYTE`` x the trace's uncompressed size (ingest's chunked
path measured ~2.7x, scan.py / trace.from_bytes; rendering the output adds its bytes), so at most
MemAvailable / (the largest trace's estimate) workers run at once, and never more than the CPUs. A progress bar
goes to stderr; one summary (a row per trace and target, then the slowest rank per target) to stdout and to
OUT/summary.json. A trace that fails is a row with its one-line error, and the exit code is then non-zero.
Each trace is replayed on its own; ``compare DIR`` replays the ranks of one run jointly.
"""
from __future__ import annotations

import json
import os
import struct
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Optional

from habitat_trace.errors import HabitatTraceError, OutputError

PEAK_PER_BYTE = 3.0  # estimated worker peak / uncompressed trace bytes (module doc)
GZIP_MAGIC = b"\x1f\x8b"


def uncompressed_size(path: Path) -> int:
    """Bytes of the JSON document: a gzip file's ISIZE footer (RFC 1952: the size mod 2^32; past 4 GiB the
    smallest value with that remainder that is not below the compressed size, a lower bound), else the file size."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(2) != GZIP_MAGIC or size < 18:
            return size
        f.seek(-4, os.SEEK_END)
        isize = struct.unpack("<I", f.read(4))[0]
    while isize < size:
        isize += 2**32
    return isize


def available_memory() -> int:
    """MemAvailable from /proc/meminfo (Linux), else the free physical pages."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def plan_jobs(files: list[Path], jobs: int, memory: Optional[int] = None) -> tuple[int, str]:
    """Workers to run: ``jobs`` capped by the CPUs and by memory / the largest trace's estimated peak; a note
    when capped."""
    if jobs < 1:
        raise HabitatTraceError(f"--jobs {jobs}: give a positive number")
    peak = PEAK_PER_BYTE * max(uncompressed_size(f) for f in files)
    memory = available_memory() if memory is None else memory
    by_memory = max(1, int(memory // max(peak, 1.0)))
    n = min(jobs, by_memory, os.cpu_count() or 1, len(files))
    note = ""
    if n < min(jobs, len(files)):
        note = (f"--jobs {jobs} capped to {n}: {memory / 2**30:.1f} GiB available, up to {peak / 2**30:.2f} GiB "
                f"per trace (~{PEAK_PER_BYTE:g}x its {peak / PEAK_PER_BYTE / 2**20:.0f} MiB JSON), "
                f"{os.cpu_count()} CPUs")
    return n, note


def scale_one(trace: Path, to: list[str], out: Path, specs: Optional[Path], origin: Optional[str],
              whatif: dict[str, Any]) -> list[dict[str, Any]]:
    """One trace to every target (runs in a worker): a summary row per target, or one row with the error."""
    import resource

    from habitat_trace import pipeline
    from habitat_trace.pipeline import iteration_figures
    from habitat_trace.commands.scale import slug, stem
    from habitat_trace.pipeline import resolve_origin
    from habitat_trace.emit.writer import write_trace
    from habitat_trace.ingest import load
    from habitat_trace.scale.collective import with_deployment
    from habitat_trace.scale.specs import load_catalog

    try:
        catalog = load_catalog(specs)
        loaded = load(trace)
        src = resolve_origin(loaded, catalog, origin)
        info = loaded.distributed
        clock = pipeline.host_clock(loaded)  # one per trace: every target replays on the same host
        base = iteration_figures(loaded, pipeline.scale(loaded, src, src, clock=clock).timeline)[0]
        rows = []
        for name in to:
            target = with_deployment(catalog.resolve(name), **whatif)
            scaled = pipeline.scale(loaded, src, target, clock=clock)
            prediction, timeline = scaled.prediction, scaled.timeline
            path = out / f"{stem(trace)}.{slug(target.name)}.pt.trace.json.gz"
            write_trace(loaded, timeline, prediction, path, {"input": trace.name, "specs_file": Path(specs).name if specs
                                                             else None, **scaled.record()})
            it = iteration_figures(loaded, timeline)[0]
            rows.append({"trace": trace.name, "rank": info.rank if info else None, "origin": src.name,
                         "target": target.name, "origin_iteration_ms": base, "iteration_ms": it,
                         "speedup": base / it if it > 0 else None, "methods": prediction.method_counts(),
                         "warnings": list(prediction.warnings), "output": str(path), "error": None})
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
        for r in rows:
            r["worker_peak_rss_mib"] = peak / 2**20
        return rows
    except HabitatTraceError as exc:
        return [{"trace": trace.name, "error": str(exc)}]


def run(directory: Path, to: list[str], out: Path, specs: Optional[Path], origin: Optional[str], jobs: int,
        whatif: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from habitat_trace.analysis.multirank import trace_files
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    for name in to:  # unknown names fail before any work
        catalog.resolve(name)
    if not Path(out).is_dir():
        raise OutputError(f"{out}: with a directory of traces, -o must be an existing directory; create it first")
    files = trace_files(directory)
    n, note = plan_jobs(files, jobs)
    err = Console(stderr=True)
    if note:
        err.print(f"note: {note}")
    rows: list[dict[str, Any]] = []
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar, ProcessPoolExecutor(max_workers=n) as pool:
        task = bar.add_task(f"scaling {len(files)} traces on {n} workers", total=len(files))
        futures = [pool.submit(scale_one, f, to, Path(out), specs, origin, whatif) for f in files]
        for fut in as_completed(futures):
            rows.extend(fut.result())
            bar.update(task, advance=1)
    rows.sort(key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r["trace"], r.get("target", "")))
    summary = summarize(rows, jobs=n)
    (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print_summary(summary)
    failed = [r for r in rows if r.get("error")]
    if failed:
        raise HabitatTraceError(f"{directory}: {len(failed)} of {len(files)} traces failed (see the summary; "
                                f"first: {failed[0]['trace']}: {failed[0]['error']})")


def summarize(rows: list[dict[str, Any]], jobs: int) -> dict[str, Any]:
    """The per-trace rows and, per target, the slowest trace (rank) and its iteration."""
    ok = [r for r in rows if not r.get("error")]
    targets: dict[str, dict[str, Any]] = {}
    for r in ok:
        t = targets.setdefault(r["target"], {"target": r["target"], "iteration_ms": -1.0})
        if r["iteration_ms"] > t["iteration_ms"]:
            t.update(iteration_ms=r["iteration_ms"], slowest=r["trace"], rank=r["rank"],
                     origin_iteration_ms=r["origin_iteration_ms"])
    return {"jobs": jobs, "traces": rows, "slowest_per_target": list(targets.values())}


def print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"scaled {len({r['trace'] for r in summary['traces']})} traces on {summary['jobs']} workers "
                    "(each replayed on its own; `compare DIR` replays the ranks jointly)", title_justify="left")
    for c in ("trace", "rank", "target", "origin it. ms", "target it. ms", "speed-up", "note"):
        t.add_column(c, justify="left" if c in ("trace", "target", "note") else "right")
    for r in summary["traces"]:
        if r.get("error"):
            t.add_row(r["trace"], "", "", "", "", "", f"[red]{r['error']}[/red]")
            continue
        t.add_row(r["trace"], "-" if r["rank"] is None else str(r["rank"]), r["target"],
                  f"{r['origin_iteration_ms']:.2f}", f"{r['iteration_ms']:.2f}",
                  "-" if r["speedup"] is None else f"{r['speedup']:.2f}x", "; ".join(r["warnings"])[:80])
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(t)
    for s in summary["slowest_per_target"]:
        console.print(f"{s['target']}: slowest trace {s['slowest']} (rank {s['rank']}): "
                      f"{s['origin_iteration_ms']:.2f} -> {s['iteration_ms']:.2f} ms per iteration")

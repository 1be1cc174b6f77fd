"""``scale``'s work, in this process or in N (``--jobs``): every run of the input to every target, each output
written where ``scale.output_paths`` says, a report row per written trace.

A unit of work is one run (its files: one trace, or the ranks of one distributed run, which are replayed together)
and some of the targets: the runs, and each run's targets split so that every worker has work. Memory-bounded: a
worker's peak is about ``PEAK_PER_BYTE`` x its run's uncompressed size (ingest's chunked path measured ~2.7x,
scan.py; writing the output adds its bytes), so at most MemAvailable / (the largest run's estimate) workers run at
once, and never more than the CPUs.

Interrupts (Ctrl-C, SIGTERM) stop every process at once: a worker checks a shared stop flag before each write and
unwinds out of the write in progress (the writer removes its temporary file), so no output appears after the
signal; ``Interrupted`` carries the rows of what was written. In a directory, a run that fails is a row with its
one-line error; a single file's error is raised as it is (its own exit code).
"""
from __future__ import annotations

import logging
import os
import signal
import struct
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from habitat_trace.errors import HabitatTraceError, Interrupted, UsageError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from habitat_trace.pipeline import Options
    from habitat_trace.scale.gpu import GpuSpec

PEAK_PER_BYTE = 3.0  # estimated worker peak / uncompressed trace bytes (module doc)
GZIP_MAGIC = b"\x1f\x8b"


def uncompressed_size(path: Path) -> int:
    """Bytes of the JSON document: a gzip file's ISIZE footer (RFC 1952: the size mod 2^32; past 4 GiB the
    smallest value with that remainder that is not below the compressed size, a lower bound), else the file size;
    0 for what is not a regular file (a FIFO is read once, by the scaling itself)."""
    if not path.is_file():
        return 0
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


def plan_jobs(sizes: Sequence[int], jobs: int, work: int, memory: Optional[int] = None) -> tuple[int, str]:
    """Workers to run: ``jobs`` capped by the ``work`` items (trace x target), the CPUs and memory / the largest
    run's estimated peak (``sizes``: each run's uncompressed bytes); a note when capped."""
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: give a positive number")
    peak = PEAK_PER_BYTE * max(sizes)
    memory = available_memory() if memory is None else memory
    by_memory = max(1, int(memory // max(peak, 1.0)))
    n = min(jobs, by_memory, os.cpu_count() or 1, work)
    note = ""
    if n < min(jobs, work):
        note = (f"--jobs {jobs} capped to {n}: {memory / 2**30:.1f} GiB available, up to {peak / 2**30:.2f} GiB "
                f"per run (~{PEAK_PER_BYTE:g}x its {peak / PEAK_PER_BYTE / 2**20:.0f} MiB JSON), "
                f"{os.cpu_count()} CPUs")
    return n, note


@dataclass(frozen=True)
class Unit:
    files: tuple[Path, ...]  # one run
    targets: tuple[GpuSpec, ...]


@dataclass(frozen=True)
class UnitResult:
    rows: list[dict[str, Any]]
    interrupted: Optional[str] = None  # "SIGINT" or "SIGTERM" when a signal stopped it


def units(runs: Sequence[Sequence[Path]], targets: Sequence[GpuSpec], jobs: int) -> list[Unit]:
    """Each run with all the targets, or with a share of them when there are fewer runs than workers."""
    chunks = max(1, min(len(targets), -(-jobs // max(len(runs), 1))))
    return [Unit(tuple(run), tuple(targets[i::chunks])) for run in runs for i in range(chunks)]


def execute(runs: Sequence[Sequence[Path]], targets: Sequence[GpuSpec], options: Options,
            paths: dict[tuple[Path, str], Path], jobs: int, one_file: bool) -> list[dict[str, Any]]:
    """Every unit's rows, in input order; Interrupted on a signal (module doc)."""
    from habitat_trace.commands.common import note, progress

    n, why = plan_jobs([sum(uncompressed_size(f) for f in run) for run in runs], jobs, len(runs) * len(targets))
    if why:
        note(f"note: {why}", err=True)
    work = units(runs, targets, n)
    total = sum(len(u.files) * len(u.targets) for u in work)
    with progress(f"scaling {_n(sum(len(r) for r in runs), 'trace')} to {_n(len(targets), 'GPU')}") as step:
        if n == 1:
            return _in_process(work, options, paths, one_file, step)
        return _in_pool(work, options, paths, n, lambda written: step(f"wrote {written} of {_n(total, 'trace')}"))


def _in_process(work: list[Unit], options: Options, paths: dict[tuple[Path, str], Path], one_file: bool,
                step: Callable[[str], None]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for unit in work:
        result = scale_unit(unit, options, paths, raise_errors=one_file, say=step)
        rows += result.rows
        if result.interrupted:
            raise Interrupted(rows, _exit_code(result.interrupted))
    return rows


def scale_unit(unit: Unit, options: Options, paths: dict[tuple[Path, str], Path],
               on_row: Optional[Callable[[dict[str, Any]], Any]] = None, raise_errors: bool = False,
               stop: Any = None, say: Callable[[str], None] = log.info) -> UnitResult:
    """Load the unit's run, and write each rank on each of its targets (stopping before a write once ``stop`` is
    set); its rows. Errors of the input are a row each (raised with ``raise_errors``). A signal that lands after a
    write's rename still counts that output as written (it is whole: the rename is atomic). ``say``: each step."""
    from habitat_trace.emit.writer import write_trace
    from habitat_trace.pipeline import Run
    from habitat_trace.pipeline.document import target_document

    rows: list[dict[str, Any]] = []
    pending: Optional[tuple[Any, Any, Path, Any]] = None  # the write in progress: base, replay, path, its old stamp
    try:
        say(f"reading {', '.join(f.name for f in unit.files)}")
        run = Run.open(unit.files, options)
        base = run.baseline()
        for target in unit.targets:
            say(f"{target.name}: predicting {sum(len(r.tables.gpu) for r in run.ranks)} GPU events and replaying")
            replay = run.replay(target)
            for b, rr in zip(base.ranks, replay.ranks):
                if stop is not None and stop.is_set():
                    return UnitResult(rows, "SIGINT")
                path = paths[(rr.tables.path, target.name)]
                say(f"{target.name}: writing {'stdout' if str(path) == '-' else path.name}")
                pending = (b, rr, path, _stamp(path))
                rows.append(output_row(b, rr, write_trace(target_document(rr), path), len(unit.files) == 1))
                pending = None
                if on_row is not None:
                    on_row(rows[-1])
    except HabitatTraceError as exc:
        if raise_errors:
            raise
        return UnitResult(rows + error_rows(list(unit.files), str(exc), exc.exit_code))
    except (KeyboardInterrupt, SystemExit) as exc:
        recorded = bool(rows) and rows[-1].get("output") == str(pending[2] if pending else None)
        if pending is not None and not recorded and _stamp(pending[2]) not in (None, pending[3]):
            rows.append(output_row(pending[0], pending[1], pending[2], len(unit.files) == 1))
        return UnitResult(rows, "SIGINT" if isinstance(exc, KeyboardInterrupt) else "SIGTERM")
    return UnitResult(rows)


def output_row(base: Any, rr: Any, written: Path, single: bool) -> dict[str, Any]:
    """The report's row for one written trace (``base``: the rank on its origin; ``rr``: on the target)."""
    from habitat_trace.pipeline.document import method_counts

    h0, h = base.headline, rr.headline
    it0, it = h0.iteration_ms, h.iteration_ms
    return {"trace": rr.tables.path.name, "rank": None if single else rr.rank.number, "origin": rr.origin.name,
            "target": rr.target.name, "origin_iteration_ms": it0, "origin_iteration_low_ms": h0.iteration_low_ms,
            "origin_iteration_high_ms": h0.iteration_high_ms, "iteration_ms": it,
            "iteration_low_ms": h.iteration_low_ms, "iteration_high_ms": h.iteration_high_ms,
            "range_source": h.range_source,
            "speedup": it0 / it if it > 0 else None, "gpu_busy_ms": h.gpu_busy_ms,
            "methods": method_counts(rr.prediction), "warnings": list(rr.prediction.warnings),
            "output": "stdout" if str(written) == "-" else str(written), "error": None}


def error_rows(files: list[Path], error: str, exit_code: int = HabitatTraceError.exit_code) -> list[dict[str, Any]]:
    """A row per file of a run that failed; ``exit_code`` (the error's) is the command's when it is the first, not a
    column of the report."""
    return [{"trace": f.name, "target": None, "error": error, "exit_code": exit_code} for f in files]


def _stamp(path: Path) -> Optional[tuple[int, int]]:
    """(inode, mtime) of a regular file, None when there is none: a rename into place changes it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns) if str(path) != "-" and path.is_file() else None


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def _exit_code(signal_name: str) -> int:
    return 128 + (signal.SIGTERM if signal_name == "SIGTERM" else signal.SIGINT)


# --- the pool -------------------------------------------------------------------------------------------------
# A worker process's signal state: the shared stop flag, and whether a unit is running (only then does a signal
# unwind it, once; an idle worker ignores it and takes no new unit).
_WORKER: dict[str, Any] = {"stop": None, "busy": False, "hit": False}


def _worker_init(stop: Any, pids: Any) -> None:
    _WORKER["stop"] = stop
    pids.put(os.getpid())
    signal.signal(signal.SIGINT, _worker_signal)
    signal.signal(signal.SIGTERM, _worker_signal)


def _worker_signal(signum: int, frame: object) -> None:
    _WORKER["stop"].set()
    if _WORKER["busy"] and not _WORKER["hit"]:
        _WORKER["hit"] = True
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)


def _pool_unit(unit: Unit, options: Options, paths: dict[tuple[Path, str], Path]) -> UnitResult:
    if _WORKER["stop"].is_set():
        return UnitResult([], "SIGINT")
    _WORKER["busy"], _WORKER["hit"] = True, False
    try:
        return scale_unit(unit, options, paths, stop=_WORKER["stop"])
    finally:
        _WORKER["busy"] = False


def _in_pool(work: list[Unit], options: Options, paths: dict[tuple[Path, str], Path], n: int,
             done: Callable[[int], None]) -> list[dict[str, Any]]:
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool

    stop, pids = multiprocessing.Event(), multiprocessing.SimpleQueue()  # type: Any, Any
    results: dict[int, UnitResult] = {}
    with ProcessPoolExecutor(max_workers=n, initializer=_worker_init, initargs=(stop, pids)) as pool:
        futures = {pool.submit(_pool_unit, u, options, paths): i for i, u in enumerate(work)}
        try:
            for fut in as_completed(futures):
                results[futures[fut]] = res = fut.result()
                done(sum(1 for r in _rows(results) if not r.get("error")))
                if res.interrupted:
                    raise KeyboardInterrupt
        except BrokenProcessPool:
            raise HabitatTraceError("a worker process died (out of memory?); run again with fewer --jobs") from None
        except (KeyboardInterrupt, SystemExit) as exc:
            code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 128 + signal.SIGINT
            _stop_workers(stop, pids, futures, results)
            raise Interrupted(_rows(results), code) from None
    return _rows(results)


def _stop_workers(stop: Any, pids: Any, futures: dict[Future, int], results: dict[int, UnitResult]) -> None:
    """Set the stop flag, signal every worker (one that is writing unwinds out of it), cancel what has not
    started and collect the rows of what was written; a second Ctrl-C meanwhile is ignored."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        stop.set()
        while not pids.empty():
            try:
                os.kill(pids.get(), signal.SIGINT)
            except ProcessLookupError:
                pass
        for fut, i in futures.items():
            if i not in results and not fut.cancel():
                try:
                    results[i] = fut.result()
                except BaseException:  # a worker that died, or was stopped outside a unit, has no rows to give
                    pass
    finally:
        signal.signal(signal.SIGINT, previous)


def _rows(results: dict[int, UnitResult]) -> list[dict[str, Any]]:
    return [r for i in sorted(results) for r in results[i].rows]

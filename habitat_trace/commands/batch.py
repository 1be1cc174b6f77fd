"""``scale``'s work, in this process or in N (``--jobs``): every run of the input to every target, each output
written where ``scale.output_paths`` says, a report row per written trace.

A unit of work is one run (its files: one trace, or the ranks of one distributed run, which are replayed together)
and some of the targets: the runs, and each run's targets split so that every worker has work. Memory-bounded: a
worker's peak is about ``PEAK_PER_BYTE`` x its run's uncompressed size (pipeline/jobs.py), so at most
MemAvailable / (the largest run's estimate) workers run at once, and never more than the CPUs.

Interrupts (Ctrl-C, SIGTERM) stop every process at once (pipeline/pool.py): a worker checks the pool's stop flag before
each write and unwinds out of the write in progress (the writer removes its temporary file), so no output appears
after the signal; ``Interrupted`` carries the rows of what was written. In a directory, a run that fails is a row
with its one-line error; a single file's error is raised as it is (its own exit code).
"""
from __future__ import annotations

import logging
import os
import signal
from concurrent.futures import Future, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from habitat_trace.errors import HabitatTraceError, Interrupted
from habitat_trace.pipeline.jobs import plan_jobs, uncompressed_size

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from habitat_trace.pipeline import Options
    from habitat_trace.pipeline.pool import StoppablePool
    from habitat_trace.scale.gpu import GpuSpec

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
            paths: dict[tuple[Path, str], Path], jobs: int, one_file: bool,
            dask: Optional[str] = None) -> list[dict[str, Any]]:
    """Every unit's rows, in input order; Interrupted on a signal (module doc). The ranks of a distributed run go
    through pipeline/fanout.py (one rank's tables in a process at a time), on ``jobs`` processes or ``dask``."""
    from habitat_trace.commands.common import note, progress

    # --world-size on a run of several ranks is refused by pipeline.Run, with its error row
    ranked = [run for run in runs if len(run) > 1 and not options.data_parallel.active]
    alone = [run for run in runs if run not in ranked]
    with progress(f"scaling {_n(sum(len(r) for r in runs), 'trace')} to {_n(len(targets), 'GPU')}") as step:
        rows = [row for run in ranked for row in _fanned(run, targets, options, paths, jobs, dask, step)]
        if not alone:
            return rows
        n, why = plan_jobs([sum(uncompressed_size(f) for f in run) for run in alone], jobs,
                           len(alone) * len(targets))
        if why:
            note(f"note: {why}", err=True)
        work = units(alone, targets, n)
        total = sum(len(u.files) * len(u.targets) for u in work)
        try:
            if n == 1:
                return rows + _in_process(work, options, paths, one_file, step)
            return rows + _in_pool(work, options, paths, n,
                                   lambda written: step(f"wrote {written} of {_n(total, 'trace')}"))
        except Interrupted as exc:
            raise Interrupted(rows + exc.rows, exc.exit_code) from None


def _fanned(files: Sequence[Path], targets: Sequence[GpuSpec], options: Options, paths: dict[tuple[Path, str], Path],
            jobs: int, dask: Optional[str], say: Callable[[str], None]) -> list[dict[str, Any]]:
    """The rows of one distributed run, scaled by pipeline.fanout (its traces written beside their outputs, renamed
    into place at the end); a row per rank with the error when it fails; Interrupted (nothing renamed) on a signal."""
    from functools import partial

    from habitat_trace.pipeline.fanout import fan_out, open_pool

    mine = [p for (f, _), p in paths.items() if f in set(files)]
    try:
        with open_pool(files, jobs, dask) as pool:
            rows = fan_out(files, options, targets, pool, write=partial(write_staged, paths=paths), progress=say).rows
        for row in rows:
            os.replace(staging(Path(row["output"])), row["output"])
        return rows
    except HabitatTraceError as exc:
        return error_rows(list(files), str(exc))
    except (KeyboardInterrupt, SystemExit) as exc:
        raise Interrupted([], 128 + signal.SIGINT if isinstance(exc, KeyboardInterrupt) else
                          exc.code if isinstance(exc.code, int) else 128 + signal.SIGTERM) from None
    finally:
        for p in mine:
            staging(p).unlink(missing_ok=True)


# prefix of a trace of a run of ranks written before the run is done (_fanned renames it then): a prefix, so that
# the name keeps its .gz (the writer compresses by the name; a suffix wrote plain JSON under .json.gz names)
STAGING = ".habitat-staging."


def staging(path: Path) -> Path:
    return path.with_name(STAGING + path.name)


def write_staged(replays: list[Any], targets: Sequence[Optional[GpuSpec]],
                 paths: dict[tuple[Path, str], Path]) -> list[dict[str, Any]]:
    """fanout.Writer for ``scale``: each target's trace of the rank (``replays``: the origin's first), written to
    its staging path; the report's rows name the final path."""
    from habitat_trace.emit.writer import write_trace
    from habitat_trace.pipeline.document import target_document

    rows = []
    base = replays[0]
    for rr, t in zip(replays[1:], targets[1:]):
        final = paths[(rr.tables.path, t.name)]  # type: ignore[union-attr]
        write_trace(target_document(rr), staging(final))
        rows.append(output_row(base, rr, final, single=False))
    return rows


def _in_process(work: list[Unit], options: Options, paths: dict[tuple[Path, str], Path], one_file: bool,
                step: Callable[[str], None]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for unit in work:
        result = scale_unit(unit, options, paths, raise_errors=one_file, say=step, spare_cpu=_spare_cpu(1))
        rows += result.rows
        if result.interrupted:
            raise Interrupted(rows, _exit_code(result.interrupted))
    return rows


def scale_unit(unit: Unit, options: Options, paths: dict[tuple[Path, str], Path],
               on_row: Optional[Callable[[dict[str, Any]], Any]] = None, raise_errors: bool = False,
               stopping: Optional[Callable[[], bool]] = None, say: Callable[[str], None] = log.info,
               spare_cpu: bool = False) -> UnitResult:
    """Load the unit's run, and write each rank on each of its targets (stopping before a write once ``stopping()``
    says so); its rows. Errors of the input are a row each (raised with ``raise_errors``). A signal that lands after a
    write's rename still counts that output as written (it is whole: the rename is atomic). ``say``: each step.
    ``spare_cpu``: a CPU no other worker uses, on which each trace is compressed and written while the next target
    is predicted (emit.writer.WriteBehind)."""
    from habitat_trace.emit.writer import WriteBehind
    from habitat_trace.pipeline import Run
    from habitat_trace.pipeline.document import target_document

    rows: list[dict[str, Any]] = []
    single = len(unit.files) == 1
    behind = WriteBehind(enabled=spare_cpu)
    pending: Optional[tuple[Any, Any, Path, Any]] = None  # the latest write: base, replay, path, its old stamp

    def written(b: Any, rr: Any) -> Callable[[Path], None]:
        def done(path: Path) -> None:  # idempotent: an interrupt can make WriteBehind run it twice (its drain doc)
            if any(r.get("output") == ("stdout" if str(path) == "-" else str(path)) for r in rows):
                return
            rows.append(output_row(b, rr, path, single))
            if on_row is not None:
                on_row(rows[-1])
        return done

    try:
        say(f"reading {', '.join(f.name for f in unit.files)}")
        run = Run.open(unit.files, options)
        base = run.baseline()
        for target in unit.targets:
            say(f"{target.name}: predicting {sum(len(r.tables.gpu) for r in run.ranks)} GPU events and replaying")
            replay = run.replay(target)
            for b, rr in zip(base.ranks, replay.ranks):
                if stopping is not None and stopping():
                    _finish(behind.abort())
                    return UnitResult(rows, "SIGINT")
                path = paths[(rr.tables.path, target.name)]
                say(f"{target.name}: writing {'stdout' if str(path) == '-' else path.name}")
                pending = (b, rr, path, _stamp(path))
                behind.submit(target_document(rr), path, written(b, rr))
        behind.drain()
    except HabitatTraceError as exc:
        try:  # the write in flight is an earlier target's, whole: it lands
            behind.drain()
        except HabitatTraceError:
            pass  # the first error is the one reported
        if raise_errors:
            raise
        return UnitResult(rows + error_rows(list(unit.files), str(exc), exc.exit_code))
    except (KeyboardInterrupt, SystemExit) as exc:
        # a write that reached its rename before the signal is whole (the rename is atomic): it counts as written;
        # one behind that had not is never renamed into place (WriteBehind.abort)
        _finish(behind.abort())
        recorded = any(r.get("output") == str(pending[2]) for r in rows) if pending else True
        if pending is not None and not recorded and _stamp(pending[2]) not in (None, pending[3]):
            rows.append(output_row(pending[0], pending[1], pending[2], single))
        return UnitResult(rows, "SIGINT" if isinstance(exc, KeyboardInterrupt) else "SIGTERM")
    return UnitResult(rows)


def _spare_cpu(workers: int) -> bool:
    """Whether each of ``workers`` processes has a second CPU for its write behind (emit.writer.WriteBehind)."""
    return (os.cpu_count() or 1) >= 2 * workers


def _finish(pending: Optional[tuple[Path, Callable[[Path], Any]]]) -> None:
    """Record a write behind that was in place when the unit stopped."""
    if pending is not None:
        pending[1](pending[0])


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
def _pool_unit(unit: Unit, options: Options, paths: dict[tuple[Path, str], Path], spare_cpu: bool) -> UnitResult:
    from habitat_trace.pipeline.pool import stopping

    return scale_unit(unit, options, paths, stopping=stopping, spare_cpu=spare_cpu)


def _in_pool(work: list[Unit], options: Options, paths: dict[tuple[Path, str], Path], n: int,
             done: Callable[[int], None]) -> list[dict[str, Any]]:
    from concurrent.futures.process import BrokenProcessPool

    from habitat_trace.pipeline.pool import StoppablePool

    results: dict[int, UnitResult] = {}
    with StoppablePool(n) as pool:
        futures = {pool.submit(_pool_unit, u, options, paths, _spare_cpu(n)): i for i, u in enumerate(work)}
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
            _stop_workers(pool, futures, results)
            raise Interrupted(_rows(results), code) from None
    return _rows(results)


def _stop_workers(pool: StoppablePool, futures: dict[Future, int], results: dict[int, UnitResult]) -> None:
    """Stop the pool (pipeline/pool.py: a worker that is writing unwinds out of it), cancel what has not started and
    collect the rows of what was written; a second Ctrl-C meanwhile is ignored."""
    from habitat_trace.interrupts import ignoring_sigint

    with ignoring_sigint():
        pool.stop()
        for fut, i in futures.items():
            if i not in results and not fut.cancel():
                try:
                    results[i] = fut.result()
                except BaseException:  # a worker that died, or was stopped outside a unit, has no rows to give
                    pass


def _rows(results: dict[int, UnitResult]) -> list[dict[str, Any]]:
    return [r for i in sorted(results) for r in results[i].rows]

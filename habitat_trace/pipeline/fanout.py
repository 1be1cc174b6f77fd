"""A run of several ranks, no process holding more than one rank's tables: map -> reduce -> map over the ranks, in
this process, in N local processes (``--jobs N``) or on a Dask cluster (``--dask ADDRESS``), one code for all three.
(One exception: a run in this process whose ranks' summed ingest peaks fit RANK_CACHE_BYTES keeps each rank's tables
from the first map to the last, instead of ingesting it again for each.)

1. map (``_summarize``): per rank, ingest, predict on every target and reduce the rank to its summary for the joint
   replay (timeline/summary.py) on each host clock it is replayed on: the central one and the band's fast and slow
   ends (pipeline.run.BandEnds: the band of the slowest of the run's hosts, the fast end with the recording's
   contention taken out, as Run.replay's); a few values per collective.
2. reduce (``joint.settle``): per target and clock, the joint replay on the summaries alone.
3. map (``_finish``): per rank, ingest again, replay on the settled durations (joint_replay's last step) and keep what
   the caller needs: the rank's figures (``RankFigures``: compare's row), and for ``scale`` its written traces. The
   launch-queue rounds of joint.replay_ranks (a stream holding 1,021 pending launches: rare) repeat 2 and 3 with the
   delayed ranks' new summaries; ``scale`` writes a rank's traces (``write``, commands/batch.py) once no round
   follows, beside their outputs, and renames them when the run is done.

Every step is Run.replay's on the same ranks (the same functions, in the same order): the figures and traces are
those of the single-process path (tests/test_fanout.py). A task's memory is ``PEAK_PER_BYTE`` x its trace's JSON
size (pipeline/jobs.py), declared to the scheduler: a Dask task asks for that much of the workers' ``MEMORY``
resource, the local pool runs at most MemAvailable / the largest estimate processes.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.errors import HabitatTraceError
from habitat_trace.interrupts import ignoring_sigint
from habitat_trace.pipeline.options import Options
from habitat_trace.pipeline.pool import StoppablePool
from habitat_trace.pipeline.run import BandEnds, Headline, RankReplay, Replay
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.timeline.joint import MAX_QUEUE_ROUNDS, Settled, settle
from habitat_trace.timeline.summary import RankSummary

log = logging.getLogger(__name__)

CLOCKS = ("central", "fast", "slow")  # the host clocks a rank is replayed on: Rank.clock, Rank.band's two ends
MEMORY_RESOURCE = "MEMORY"  # the Dask worker resource a task's memory is declared in (bytes)
# A run in this process (--jobs 1) whose ranks' summed ingest peak estimates (PEAK_PER_BYTE x JSON) fit this many bytes
# ingests each rank once for every map: re-ingesting took 2.3 of 4.9 s of a 4-rank compare (perf.py's dir suite,
# 2026-11-27); the held tables are ~1/3 of a peak, so such a run holds at most ~0.7 GiB of them
RANK_CACHE_BYTES = 2 * 1024 ** 3
# what the second map does with a rank's replays (the origin's first, then each target's; the targets): the rows it
# returns come back in Fanned.rows (scale: commands/batch.py writes the traces)
Writer = Callable[[list[RankReplay], Sequence[Optional[GpuSpec]]], list[dict[str, Any]]]


@dataclass(frozen=True)
class RankFigures:
    """One rank on one target, as compare reports it: its headline, steps, the profiler overhead removed, its GPU
    time per prediction method (the joint durations), its prediction warnings, and a scale-out's communication."""

    number: Optional[int]
    headline: Headline
    steps: int
    overhead_ms: float
    method_ns: dict[str, int]
    warnings: tuple[str, ...]
    communication: Optional[pd.DataFrame] = None  # ScaledOut.communication() of a --world-size rank

    @classmethod
    def of(cls, rr: RankReplay) -> "RankFigures":
        from habitat_trace.pipeline.host import overhead_ms

        dur = np.asarray(rr.prediction.dur_ns, dtype=np.int64)
        methods = pd.Series(dur).groupby(np.asarray(rr.prediction.method, dtype=object)).sum()
        return cls(rr.rank.number, rr.headline, len(rr.tables.steps), overhead_ms(rr.host),
                   {str(k): int(v) for k, v in methods.items()}, tuple(rr.prediction.warnings),
                   rr.scaled_out.communication() if rr.scaled_out is not None else None)


@dataclass(frozen=True)
class RunFigures:
    """The run on one target (None: each rank on its origin GPU): every rank's figures, the joint replay's
    collectives (per rank and matched collective, transfer_ns and wait_ns) and the warnings."""

    gpu: GpuSpec
    target: Optional[GpuSpec]
    ranks: tuple[RankFigures, ...]
    collectives: pd.DataFrame
    warnings: tuple[str, ...]

    @classmethod
    def of(cls, replay: Replay) -> "RunFigures":
        return cls(replay.gpu, replay.target, tuple(RankFigures.of(r) for r in replay.ranks), replay.collectives,
                   replay.warnings)

    def slowest(self) -> int:
        """The position of the rank whose iteration sets the run's step (the first of equals)."""
        its = [r.headline.iteration_ms for r in self.ranks]
        return its.index(max(its))


# --- the pools: where the maps run --------------------------------------------------------------------------


class LocalPool:
    """This process (``jobs`` 1) or ``jobs`` worker processes, kept for the run's maps; on an interrupt the workers
    stop at once (pipeline/pool.py), not after the ranks already queued to them."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: Optional[StoppablePool] = None

    def map(self, fn: Callable[..., Any], items: Sequence[tuple], memory: Sequence[int]) -> list[Any]:
        if self.jobs == 1:
            return [fn(*args) for args in items]
        from concurrent.futures.process import BrokenProcessPool

        if self._pool is None:
            self._pool = StoppablePool(self.jobs)
        futures = [self._pool.submit(fn, *args) for args in items]
        try:
            return [f.result() for f in futures]
        except BrokenProcessPool:
            raise HabitatTraceError("a worker process died (out of memory?); run again with fewer --jobs") from None
        except (KeyboardInterrupt, SystemExit):
            with ignoring_sigint():
                self._pool.stop()
                self.close()
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class DaskPool:
    """The workers of a Dask cluster (``dask.distributed.Client``); each task asks for its memory estimate of the
    workers' MEMORY resource (start them with ``--resources MEMORY=<bytes>``)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        workers = client.scheduler_info().get("workers", {})
        self.capacity = max((w.get("resources", {}).get(MEMORY_RESOURCE, 0) for w in workers.values()), default=0)
        if not self.capacity:
            address = client.scheduler.address if client.scheduler is not None else "the Dask cluster"
            client.close()
            raise HabitatTraceError(f"{address}: no Dask worker declares a {MEMORY_RESOURCE} "
                                    f"resource; start the workers with --resources {MEMORY_RESOURCE}=<bytes each may "
                                    "use>, e.g. `dask worker ADDRESS --resources MEMORY=64e9`")

    @classmethod
    def connect(cls, address: str) -> "DaskPool":
        try:
            from dask.distributed import Client
        except ImportError:
            raise HabitatTraceError(f"--dask {address}: Dask is not installed; pip install 'habitat-trace[dask]'") \
                from None
        try:
            return cls(Client(address, timeout=30))
        except OSError as exc:
            raise HabitatTraceError(f"--dask {address}: no Dask scheduler answers there ({exc}); give the address "
                                    "`dask scheduler` printed, e.g. tcp://host:8786") from None

    def map(self, fn: Callable[..., Any], items: Sequence[tuple], memory: Sequence[int]) -> list[Any]:
        big = max(memory, default=0)
        if big > self.capacity:
            raise HabitatTraceError(f"a rank needs ~{big / 2**30:.1f} GiB ({_PEAK_NOTE}) but the largest Dask worker "
                                    f"offers {self.capacity / 2**30:.1f} GiB of {MEMORY_RESOURCE}; start workers "
                                    "with more")
        futures = [self.client.submit(fn, *args, resources={MEMORY_RESOURCE: m}, pure=False)
                   for args, m in zip(items, memory)]
        return list(self.client.gather(futures))

    def close(self) -> None:
        self.client.close()


_PEAK_NOTE = "ingest's peak, ~3x its trace's JSON"


@contextmanager
def open_pool(files: Sequence[Path], jobs: int = 1, dask: Optional[str] = None) -> Iterator[Any]:
    """The pool the maps of ``files`` run on: the Dask cluster at ``dask``, else ``jobs`` local processes capped by
    the CPUs and by MemAvailable / the largest rank's estimate (jobs.plan_jobs; 1: this process). Closed after."""
    from habitat_trace.pipeline.jobs import plan_jobs, uncompressed_size

    if dask:
        pool: Any = DaskPool.connect(dask)
    else:
        n, why = plan_jobs([uncompressed_size(f) for f in files], jobs, len(files))
        if why:
            log.warning(why)
        pool = LocalPool(n)
    try:
        yield pool
    finally:
        pool.close()


def rank_files(path: Path) -> list[Path]:
    """The traces of ``path`` when it is a directory of the ranks of one distributed run (runs_in: each trace's
    top-level keys only), in rank order; [] otherwise (a file, one trace, or traces of several runs)."""
    from habitat_trace.pipeline.run import runs_in

    if not path.is_dir():
        return []
    runs = runs_in(path)
    return list(runs[0]) if len(runs) == 1 and len(runs[0]) > 1 else []


# --- the tasks ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankMap:
    """What the first map keeps of a rank: its summaries (per target, per clock of CLOCKS) and the figures of the
    rank that need no other rank."""

    number: Optional[int]
    origin: GpuSpec
    summaries: tuple[tuple[RankSummary, ...], ...]
    prediction_warnings: tuple[tuple[str, ...], ...]  # per target
    host_warnings: tuple[str, ...]
    kept: Any  # fan_out's ``keep`` of the rank's tables
    disturbed: frozenset[int] = frozenset()  # figures.disturbed_steps of the rank's tables


@dataclass(frozen=True)
class Combo:
    """One joint replay of a rank: a target and a clock of CLOCKS, the durations the reduce settled for its matched
    collectives (``rows``, ``dur_ns``), and the launch-queue delays its clock carries from earlier rounds."""

    rows: np.ndarray
    dur_ns: np.ndarray
    delays: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    check: bool = True  # look for launch-queue delays (joint.replay_ranks: at most MAX_QUEUE_ROUNDS rounds)


@dataclass(frozen=True)
class RankRound:
    """A rank after the second map: its figures per target; per combo the delays its launch queue adds and its
    summary on the delayed clock (None: no delay); the rows of the traces it wrote (scale)."""

    figures: tuple[RankFigures, ...]
    delays: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, RankSummary]]
    rows: list[dict[str, Any]] = field(default_factory=list)


def _rank(path: Path, options: Options, cache: Optional[dict[Path, Any]] = None) -> Any:
    """The rank at ``path``, ingested, or the one ``cache`` (fan_out's, in this process) kept from an earlier map."""
    from habitat_trace.ingest.trace import load
    from habitat_trace.pipeline.run import Rank

    if cache is not None and path in cache:
        return cache[path]
    rank = Rank(load(path), options)
    if cache is not None:
        cache[path] = rank
    return rank


def _band(rank: Any, ranks: int) -> Any:
    """The rank's host band in a run of ``ranks`` (Run.replay: every collective waits for the slowest host)."""
    from habitat_trace.timeline.hostband import slowest_of

    return slowest_of(rank.band, ranks)


def _clocks(rank: Any, ranks: int) -> tuple[Any, Any, Any]:
    band = _band(rank, ranks)
    return rank.clock.clock, band.fast, band.slow


def _bases(rank: Any, p: Any) -> tuple[Any, Any, Any]:
    """The prediction each clock of CLOCKS replays: on the fast one, the recording's contention taken out
    (Run.replay's fast end: timeline.scaleout.decontended)."""
    from habitat_trace.timeline.scaleout import decontended

    return p, decontended(rank.tables, p), p


def _predictions(rank: Any, targets: Sequence[Optional[GpuSpec]]) -> list[Any]:
    from habitat_trace.scale.engine import predict

    return [predict(rank.tables, rank.origin, t if t is not None else rank.origin) for t in targets]


def _summarize(path: Path, options: Options, targets: tuple[Optional[GpuSpec], ...], ranks: int,
               keep: Optional[Callable[[Any], Any]], cache: Optional[dict[Path, Any]] = None) -> RankMap:
    """The first map (module doc)."""
    from habitat_trace.pipeline.figures import disturbed_steps
    from habitat_trace.timeline.summary import prepare, summarize

    r = _rank(path, options, cache)
    preds = _predictions(r, targets)
    prepared = prepare(r.tables)
    summaries = []
    clocks = _clocks(r, ranks)
    for p in preds:
        done: dict[tuple[int, int], RankSummary] = {}  # a point band's ends are the central clock: summarized once
        keys = []
        for c, base in zip(clocks, _bases(r, p)):
            keys.append((id(c), id(base)))
            if keys[-1] not in done:
                done[keys[-1]] = summarize(r.tables, base.dur_ns, c, prepared)
        summaries.append(tuple(done[k] for k in keys))
    host = tuple(f"rank {r.number}: {w}" if ranks > 1 else w for w in r.clock.warnings)
    return RankMap(r.number, r.origin, tuple(summaries), tuple(tuple(p.warnings) for p in preds), host,
                   None if keep is None else keep(r.tables), disturbed_steps(r.tables) if ranks > 1 else frozenset())


def _finish(path: Path, options: Options, targets: tuple[Optional[GpuSpec], ...], ranks: int,
            combos: dict[tuple[int, int], Combo], write: Optional[Writer], disturbed: frozenset[int] = frozenset(),
            cache: Optional[dict[Path, Any]] = None) -> RankRound:
    """The second map (module doc): the rank's replays on the settled durations, its figures per target and, with
    ``write``, what it returns of them once no launch-queue round follows (scale: its traces written); the figures
    read the steps no rank's host was ``disturbed`` in (figures.joint_steps)."""
    from habitat_trace.pipeline.figures import iteration_and_fastest, joint_steps
    from habitat_trace.timeline.joint import queue_delays
    from habitat_trace.timeline.replay import replay
    from habitat_trace.timeline.summary import summarize

    r = _rank(path, options, cache)
    preds = _predictions(r, targets)
    clocks = _clocks(r, ranks)
    keep = joint_steps(r.tables, disturbed) if disturbed else None
    delays: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, RankSummary]] = {}
    replays: list[RankReplay] = []
    for ti, p in enumerate(preds):
        out = []
        for ci, (start, base) in enumerate(zip(clocks, _bases(r, p))):
            c = combos[(ti, ci)]
            clock = start
            for at, d in c.delays:
                clock = clock.delayed(at, d)
            dur = np.asarray(base.dur_ns, dtype=np.int64).copy()
            dur[c.rows] = c.dur_ns
            joint = replace(base, dur_ns=dur) if len(c.rows) else base
            tl = replay(r.tables, joint, clock)
            if c.check:
                at, d = queue_delays(r.tables, tl)
                if len(at):
                    later = clock.delayed(at, d)
                    delays[(ti, ci)] = (at, d, summarize(r.tables, base.dur_ns, later))
            out.append((joint, tl, clock))
        (joint, tl, clock), fast, slow = out[0], out[1][1], out[2][1]
        host = r.clock if clock is r.clock.clock else replace(r.clock, clock=clock)
        ends = _Ends(iteration_and_fastest(r.tables, fast, keep), iteration_and_fastest(r.tables, slow, keep))
        replays.append(RankReplay(r, joint, tl, host, band_ends=BandEnds(ends, [_band(r, ranks)]),
                                  run_ranks=ranks, keep=keep))
    rows = write(replays, targets) if write is not None and not delays else []
    return RankRound(tuple(RankFigures.of(rr) for rr in replays), delays, rows)


class _Ends:
    """BandEnds' replays, already done: it asks for the fast clocks' (iteration, fastest step) first, then the slow
    ones' (pipeline.run.BandEnds.of)."""

    def __init__(self, fast: tuple[float, float], slow: tuple[float, float]) -> None:
        self._left = [[slow], [fast]]

    def __call__(self, clocks: Sequence[Any]) -> list[tuple[float, float]]:
        return self._left.pop()


# --- the driver -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fanned:
    """The run on every target (``figures``: the origin first), with ``keep`` of each rank's tables; ``rows``: what
    ``write`` returned, per target, in rank order."""

    figures: tuple[RunFigures, ...]
    kept: tuple[Any, ...]
    rows: list[dict[str, Any]]


def fan_out(files: Sequence[Path], options: Options, targets: Sequence[GpuSpec], pool: Any,
            write: Optional[Writer] = None, progress: Callable[[str], None] = log.info,
            keep: Optional[Callable[[Any], Any]] = None) -> Fanned:
    """The ranks ``files`` (one run, in rank order) on the origin and every target (module doc); ``pool``: where the
    maps run (LocalPool, DaskPool); ``write``: Writer; ``keep``: a figure of each rank's tables the caller needs
    (compare: its peak memory). Both are called in the workers, so they must pickle (module-level functions)."""
    from habitat_trace.pipeline.jobs import PEAK_PER_BYTE, uncompressed_size

    files = [Path(f) for f in files]
    every: tuple[Optional[GpuSpec], ...] = (None, *targets)
    memory = [int(PEAK_PER_BYTE * uncompressed_size(f)) for f in files]
    # tasks run here unpickled (LocalPool, one job): the maps can share the ranks they ingest (RANK_CACHE_BYTES)
    cache: Optional[dict[Path, Any]] = {} if isinstance(pool, LocalPool) and pool.jobs == 1 and \
        sum(memory) <= RANK_CACHE_BYTES else None
    progress(f"summarizing {len(files)} ranks for the joint replay")
    maps: list[RankMap] = pool.map(_summarize, [(f, options, every, len(files), keep, cache) for f in files],
                                   memory)
    combos = [(ti, ci) for ti in range(len(every)) for ci in range(len(CLOCKS))]
    summaries = {k: [m.summaries[k[0]][k[1]] for m in maps] for k in combos}
    history: dict[tuple[int, int], list[tuple[tuple[np.ndarray, np.ndarray], ...]]] = \
        {k: [()] * len(files) for k in combos}
    settled = {k: settle(summaries[k]) for k in combos}
    disturbed = frozenset().union(*(m.disturbed for m in maps))
    for rounds in range(MAX_QUEUE_ROUNDS + 1):
        progress(f"replaying {len(files)} ranks on {len(every)} GPUs" + (f" (launch-queue round {rounds})"
                                                                         if rounds else ""))
        plans = [{k: Combo(*_mine(settled[k], r), history[k][r], rounds < MAX_QUEUE_ROUNDS) for k in combos}
                 for r in range(len(files))]
        done: list[RankRound] = pool.map(_finish, [(f, options, every, len(files), p, write, disturbed, cache)
                                                   for f, p in zip(files, plans)], memory)
        again = {k for d in done for k in d.delays}
        if not again:
            break
        for k in again:  # joint.replay_ranks: the delayed clocks' ranks summarized anew, the joint replay again
            for r, d in enumerate(done):
                if k in d.delays:
                    at, dl, s = d.delays[k]
                    history[k][r] = history[k][r] + ((at, dl),)
                    summaries[k][r] = s
            settled[k] = settle(summaries[k])
    figures = tuple(_run_figures(maps, [d.figures[ti] for d in done], settled[(ti, 0)], every[ti])
                    for ti in range(len(every)))
    rows = [d.rows[ti] for ti in range(len(targets)) for d in done if d.rows]  # per target, in rank order
    return Fanned(figures, tuple(m.kept for m in maps), rows)


def _mine(s: Settled, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, durations) of rank ``rank``'s matched collectives in the settled joint replay."""
    c = s.collectives
    if not len(c):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    mine = (c["rank"] == rank).to_numpy()
    return c["row"].to_numpy()[mine], (c["transfer_ns"] + c["wait_ns"]).to_numpy()[mine]


def _run_figures(maps: Sequence[RankMap], ranks: Sequence[RankFigures], s: Settled,
                 target: Optional[GpuSpec]) -> RunFigures:
    """Run.replay's Replay, as figures: the warnings in its order (every rank's prediction warnings once each, the
    ranks' host warnings, the joint replay's)."""
    preds = [w for r in ranks for w in r.warnings]
    warnings = tuple(dict.fromkeys(preds + [w for m in maps for w in m.host_warnings] + list(s.warnings)))
    gpu = target if target is not None else maps[0].origin
    return RunFigures(gpu, target, tuple(ranks), s.collectives, warnings)

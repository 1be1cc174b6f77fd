"""The run object: ``Run`` holds the traces of one profiled run (a file is a run of one rank; a directory, one
trace per rank), the GPU catalog and the options, each rank's origin GPU and host clock, and the origin's own
replay (cached). ``Run.replay(target)`` predicts every rank's GPU events on the target (scale/) and replays the
ranks jointly on their host clocks (timeline/joint.replay_ranks: matched collectives end together, launches wait
for a full queue), so one rank is the same path with nothing to match. With ``--world-size N`` (Options.data_parallel)
a one-rank run is predicted as one of N data-parallel ranks instead: the communication DDP or FSDP adds laid into
the trace and replayed with it (timeline/scaleout.py), every rank alike. Every command, the Python API, the profiler
hook and the analyses go through it; nothing here prints or writes files.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.errors import HabitatTraceError, SpecError, TraceFormatError
from habitat_trace.ingest import reader, rules
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import DistributedInfo, Tables, load
from habitat_trace.pipeline.figures import iteration_figures
from habitat_trace.pipeline.host import GIVEN_BY_USER, PACE_TOLERANCE, HostClock, host_clock
from habitat_trace.pipeline.options import Options
from habitat_trace.scale.engine import predict
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.params import Params, recover
from habitat_trace.scale.prediction import Prediction
from habitat_trace.timeline import floors, hostband
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.joint import replay_ranks
from habitat_trace.timeline.replay import Timeline, times_view
from habitat_trace.timeline.scaleout import Prepared, ScaledOut, decontended, prepare, scale_out
from habitat_trace.timeline.steps import StepFigures, replayed_step_figures

TRACE_GLOBS = ("*.json", "*.json.gz")
REPORT_NAME = "summary.json"  # the report ``scale DIR`` writes beside its outputs: a directory's file, not a trace


def catalog_gpu(catalog: object, device_name: Optional[str]) -> Optional[GpuSpec]:
    """The catalog GPU of a deviceProperties name: the name torch reports, or a catalog name (the traces that
    ``scale`` writes name their target by its catalog name, so an output can be scaled again)."""
    if not device_name:
        return None
    return catalog.for_device(device_name) or catalog.get(device_name)  # type: ignore[attr-defined]


def resolve_origin(tables: Tables, options: Options) -> GpuSpec:
    """The GPU the trace was recorded on: ``options.origin`` (``--from``) when given, else its deviceProperties
    name, else (ROCm's generic "AMD Radeon Graphics") its CU count, memory and GFXIP (Catalog.for_properties)."""
    catalog, origin = options.catalog, options.origin
    if isinstance(origin, GpuSpec):
        return origin
    if origin:
        return catalog.resolve(origin)
    spec = catalog_gpu(catalog, tables.device_name)
    if spec is None and tables.device_properties:
        spec = catalog.for_properties(tables.device_properties)
    if spec is not None:
        return spec
    if not tables.device_name:
        raise SpecError(f"{tables.path}: the trace names no GPU (no deviceProperties); "
                        "name the origin GPU with --from GPU (see `habitat-trace gpus`)")
    raise SpecError(f"{tables.path}: origin GPU {tables.device_name!r} is not in the catalog; "
                    "name it with --from GPU (see `habitat-trace gpus`)")


class Rank:
    """One trace of the run: its tables, and (built on first use, once) its origin GPU, its host clock and the
    Perfetto-rule violations it already has (which the traces written from it carry)."""

    def __init__(self, tables: Tables, options: Options) -> None:
        self.tables = tables
        self.options = options

    @property
    def path(self) -> Path:
        return self.tables.path

    @property
    def number(self) -> Optional[int]:
        """The rank from the trace's distributedInfo (None for a single-process trace)."""
        info = self.tables.distributed
        return info.rank if info else None

    @cached_property
    def origin(self) -> GpuSpec:
        return resolve_origin(self.tables, self.options)

    @cached_property
    def clock(self) -> HostClock:
        """The host clock, calibrated to a measured un-profiled step only where the model's own replay of this
        one-process trace misses it by more than host.PACE_TOLERANCE: the calibration reads the CPU step alone and
        takes a step above CPU_BOUND_MARGIN x the GPU busy time for the host's pace, which a GPU-bound step with
        launch gaps and syncs (1.06-1.29x its busy time on the 2026-11-27 hosts) is not; it then slowed a host the
        model had right (ELECTRA fp32: replayed 65.26 ms, measured 65.35 ms, calibrated to 0.33x the removal)."""
        hc = host_clock(self.tables, self.options.host)
        info = self.tables.distributed
        if hc.measured_step_ns is None or (hc.calibration == 1.0 and hc.pace == 1.0) or (info and info.world_size > 1):
            return hc
        model = host_clock(self.tables, self.options.host, calibrate=False)
        replayed_ns = self.alone_ms(predict(self.tables, self.origin, self.origin), model.clock) * 1e6
        return model if abs(replayed_ns / hc.measured_step_ns - 1.0) <= PACE_TOLERANCE else hc

    def alone_ms(self, pred: Prediction, clock: CpuClock) -> float:
        """This trace's iteration (ms) replayed alone (no other rank) with ``pred``'s kernel times on ``clock``."""
        return iteration_figures(self.tables, replay_ranks([self.tables], [pred], [clock]).timelines[0])[0]

    @cached_property
    def band(self) -> hostband.HostBand:
        """The fastest and slowest host clocks the trace is consistent with (timeline/hostband.py): the range of
        every iteration this rank reports."""
        hc = self.clock
        return hostband.host_band(hc.clock, hc.evidence, hc.measured_source)

    @cached_property
    def band_tables(self) -> Tables:
        """The tables keeping the times the band's ends read (the runtime calls' for the launch queue, the steps'
        for the iteration; timeline.replay.times_view): replayed on the band's clocks, the same ends, without
        mapping every event."""
        t = self.tables
        return times_view(t, np.concatenate((t.calls[S.EVENT].to_numpy(), t.steps[S.EVENT].to_numpy()
                                             if len(t.steps) else np.zeros(0, dtype=np.int64))))

    @cached_property
    def floor_ms(self) -> float:
        """What the trace proves of its origin step (timeline/floors.py: busiest stream, calls, syncs), mean over
        the steady ProfilerSteps (pipeline.figures.steady_steps) in ms; 0 without steps."""
        from habitat_trace.pipeline.figures import steady_steps

        if not len(self.tables.steps):
            return 0.0
        keep = steady_steps(self.tables)
        return float(np.mean(floors.step_floor(self.tables).step_ns[keep])) / 1e6

    @cached_property
    def input_violations(self) -> dict[str, list[int]]:
        found = self.tables.violations  # ingest checks the events as it parses them
        return rules.by_rule(found if found is not None else rules.check_events(self.tables.events))

    @cached_property
    def params(self) -> Params:
        """The model's parameters (scale/params.py), for a scale-out: recovered once for every target."""
        return recover(self.tables)


@dataclass(frozen=True)
class Headline:
    """The figures compare, explain and scale lead with, per step (pipeline.figures), and the range of the
    iteration the trace leaves open: the host's pace without the profiler (timeline/hostband.py)."""

    iteration_ms: float
    gpu_busy_ms: float
    source: str  # ITERATION_SOURCES: where the iteration comes from
    iteration_low_ms: float
    iteration_high_ms: float
    range_source: str  # RANGE_SOURCES: what the range rests on


# Where a Headline's iteration comes from: on the origin, the un-profiled step measured in the trace (our hook's),
# given by the user (Host.measured_step_ms) or estimated from the trace; on a target, predicted.
ITERATION_SOURCES = ("measured", "given", "estimated", "predicted")
# What a Headline's range rests on: the origin rows' measured error when nothing anchors the trace ("model",
# hostband.PACE_*), the noise of a measured loop the clock is calibrated to ("measured": our hook's; "given": the
# user's; hostband.MEASURED_*; the origin row with a given step is that step, a point), nothing to estimate
# ("none": the profiler's overhead kept or removed before, so the trace's host is the host).
RANGE_SOURCES = ("model", "measured", "given", "none")


class BandEnds:
    """Each rank replayed on its host band's fast and on its slow clock (Rank.band), every rank jointly as in the
    central replay; replayed on first use (``scale`` writing traces never asks), once. ``iterate(clocks)`` gives
    each rank's (iteration, fastest steady step) in ms (pipeline.figures)."""

    def __init__(self, iterate: Callable[[Sequence[CpuClock]], list[tuple[float, float]]],
                 bands: Sequence[hostband.HostBand]) -> None:
        self._iterate = iterate
        self._bands = tuple(bands)
        self._ends: Optional[list[tuple[float, float]]] = None

    def of(self, position: int) -> tuple[float, float]:
        """(fast end, slow end) of the rank at ``position``: the iteration on the slow clocks, and on the fast
        clocks the fastest steady step when nothing anchors the rank's clock (hostband's "model" band), else the
        iteration there too (a measured step is a mean: its noise band is around the mean)."""
        if self._ends is None:
            fast = self._iterate([b.fast for b in self._bands])
            slow = self._iterate([b.slow for b in self._bands])
            self._ends = [(f[1] if b.source == "model" else f[0], s[0]) for f, s, b in zip(fast, slow, self._bands)]
        return self._ends[position]


@dataclass(frozen=True)
class RankReplay:
    """One rank on one target: its predicted GPU durations and the replayed timeline, on its host clock."""

    rank: Rank
    prediction: Prediction
    timeline: Timeline
    host: HostClock  # the rank's clock, with the launch-queue delays of this replay
    scaled_out: Optional[ScaledOut] = None  # --world-size N: the synthesized rank (its tables are what was replayed)
    band_ends: Optional[BandEnds] = None  # the replays on the rank's band (None: a point range)
    position: int = 0  # the rank's place in band_ends
    run_ranks: int = 1  # the ranks replayed jointly with it (their range holds the joint replay's own error too)
    keep: Optional[np.ndarray] = None  # the steps its figures read (figures.joint_steps); None: figures.steady_steps

    @property
    def tables(self) -> Tables:
        """The tables the timeline and prediction are aligned with: the rank's, or the synthesized rank's."""
        return self.scaled_out.synthesized.tables if self.scaled_out is not None else self.rank.tables

    @property
    def origin(self) -> GpuSpec:
        return self.prediction.origin

    @property
    def target(self) -> GpuSpec:
        return self.prediction.target

    def step_figures(self) -> StepFigures:
        return replayed_step_figures(self.tables, self.timeline)

    @cached_property
    def headline(self) -> Headline:
        """Built once. On the origin (same GPU) a measured un-profiled step is never contradicted: the user's
        (Host.measured_step_ms) is the iteration, exactly, source and range "given"; one the trace carries (our
        hook's) gives max(it, the GPU busy time), source "measured", its range the loop's measurement noise
        (hostband.value_range). Otherwise (and for a scale-out, which the one-GPU measurement does not describe) the
        replay's (figures.iteration_figures), source "estimated" on the origin and "predicted" on a target, its
        range the fastest steady step on the band's fast clock to the iteration on its slow clock
        (hostband.ends_range). On the origin neither the iteration nor its range is below what the trace proves
        (Rank.floor_ms). Not the central replay's GPU busy time: a faster host lets streams overlap more (gnmt on an
        H200: 27.5 ms busy on the band's fast clock, 32.4 central)."""
        it, busy = iteration_figures(self.tables, self.timeline, self.keep)
        measured = self.host.measured_step_ns
        same = self.prediction.facts is None and self.origin == self.target and self.scaled_out is None
        floor = self.rank.floor_ms if same else 0.0
        band = self.rank.band
        source = "none" if band.is_point or self.band_ends is None else band.source
        if measured is not None and same and self.host.measured_source == GIVEN_BY_USER:
            return Headline(measured / 1e6, busy, "given", measured / 1e6, measured / 1e6, "given")
        if measured is not None and same:
            central = max(measured / 1e6, busy)
            lo, hi = hostband.value_range(central, band, floor) if source != "none" else (central, central)
            return Headline(central, busy, "measured", lo, hi, source)
        central = max(it, floor)
        kind = "estimated" if same else "predicted"
        if source == "none" or self.band_ends is None:
            return Headline(central, busy, kind, central, central, "none")
        fast, slow = self.band_ends.of(self.position)
        lo, hi = hostband.ends_range(fast, slow, central, floor)
        # a data-parallel step, synthesized or replayed from its ranks: its own measured error too (hostband)
        if self.scaled_out is not None:
            lo, hi = min(lo, central * hostband.SCALEOUT_FAST), max(hi, central * hostband.SCALEOUT_SLOW)
        elif self.run_ranks > 1:
            lo, hi = min(lo, central * hostband.JOINT_FAST), max(hi, central * hostband.JOINT_SLOW)
        return Headline(central, busy, kind, lo, hi, source)


@dataclass(frozen=True)
class Replay:
    """The run on one target (``target`` None: each rank on its own origin GPU)."""

    target: Optional[GpuSpec]
    ranks: tuple[RankReplay, ...]
    collectives: pd.DataFrame  # timeline.joint: per rank and matched collective, transfer_ns and wait_ns
    passes: int
    warnings: tuple[str, ...]  # every rank's prediction warnings (once each), then the joint replay's

    @property
    def gpu(self) -> GpuSpec:
        return self.target if self.target is not None else self.ranks[0].origin

    def slowest(self) -> RankReplay:
        """The rank whose iteration sets the run's step (the first of equals)."""
        its = [r.headline.iteration_ms for r in self.ranks]
        return self.ranks[its.index(max(its))]


class Run:
    """The ranks of one profiled run (module doc)."""

    def __init__(self, tables: Sequence[Tables], options: Options, source: Optional[Path] = None) -> None:
        if not tables:
            raise TraceFormatError(f"{source}: no traces")
        world = options.data_parallel.world_size
        if world > 1 and len(tables) > 1:
            raise HabitatTraceError(
                f"{source if source is not None else tables[0].path}: --world-size {world} synthesizes the ranks "
                f"from a one-GPU trace, but this run has {len(tables)} rank traces already; drop --world-size to "
                "replay them jointly, or give one one-GPU trace")
        self.options = options
        self.ranks = tuple(Rank(t, options) for t in tables)
        self.source = Path(source) if source is not None else tables[0].path
        self._baseline: Optional[Replay] = None

    @classmethod
    def read(cls, path: str | Path | Sequence[Path], options: Options) -> tuple[list["Run"], list[Unread]]:
        """Every run of a trace file, a directory (group_ranks: the ranks of a distributed run are one run, ordered
        by rank; any other trace a run of its own) or a list of files, and the traces of a directory or list that
        could not be read (a file's own error is raised). The one place runs are read (every command, the API, the
        hook and scale's workers come through here)."""
        several = not isinstance(path, (str, Path)) or Path(path).is_dir()
        files = list(path) if not isinstance(path, (str, Path)) else trace_files(Path(path))
        tables: dict[Path, Tables] = {}
        unread: list[Unread] = []
        for f in files:
            try:
                tables[f] = load(f)
            except HabitatTraceError as exc:
                if not several:
                    raise
                unread.append(Unread(f, exc))
        runs = group_ranks(list(tables), [t.distributed for t in tables.values()])
        source = Path(path) if isinstance(path, (str, Path)) else None
        return [cls([tables[f] for f in run], options, source if len(runs) == 1 else None) for run in runs], unread

    @classmethod
    def open(cls, path: str | Path | Sequence[Path], options: Options) -> "Run":
        """One run (Run.read): a trace file (one rank), a directory of one trace per rank of one run, or the files
        of one run; the first trace that could not be read raises its error."""
        runs, unread = cls.read(path, options)
        if unread:
            raise unread[0].error
        return one_run(runs, path)

    def under(self, options: Options, tables: Optional[Sequence[Tables]] = None) -> "Run":
        """This run predicted with other ``options``; with ``tables``, its ranks' tables replaced (a scaled run: the
        target's tables, one per rank)."""
        return Run(tables if tables is not None else [r.tables for r in self.ranks], options, self.source)

    @property
    def single(self) -> bool:
        return len(self.ranks) == 1

    def baseline(self) -> Replay:
        """Each rank on its own origin GPU (built once)."""
        if self._baseline is None:
            self._baseline = self.replay(None)
        return self._baseline

    def replay(self, target: Optional[GpuSpec]) -> Replay:
        """Every rank predicted on ``target`` (None: its own origin GPU) and replayed jointly on its host clock; with
        ``--world-size N``, the one rank as one of N (``scaled_out``)."""
        if self.options.data_parallel.active:
            return self.scaled_out(target)
        from habitat_trace.pipeline.figures import disturbed_steps, iteration_and_fastest, joint_steps

        preds = [predict(r.tables, r.origin, target if target is not None else r.origin) for r in self.ranks]
        tables = [r.tables for r in self.ranks]
        joint = replay_ranks(tables, preds, [r.clock.clock for r in self.ranks])
        disturbed = frozenset().union(*(disturbed_steps(t) for t in tables)) if len(tables) > 1 else frozenset()
        keeps = [joint_steps(t, disturbed) if disturbed else None for t in tables]

        bands = [hostband.slowest_of(r.band, len(self.ranks)) for r in self.ranks]

        def iterate(clocks: Sequence[CpuClock]) -> list[tuple[float, float]]:  # the fast end: the contention out
            # decontended reads the recorded GPU times (the full tables); the replays read the calls' and steps'
            # times only (Rank.band_tables)
            ps = [decontended(t, p) for t, p in zip(tables, preds)] if clocks[0] is bands[0].fast else preds
            views = [r.band_tables for r in self.ranks]
            return [iteration_and_fastest(t, tl, k)
                    for t, tl, k in zip(views, replay_ranks(views, ps, clocks).timelines, keeps)]
        ends = BandEnds(iterate, bands)
        ranks = tuple(RankReplay(r, p, tl, r.clock if c is None or c is r.clock.clock else replace(r.clock, clock=c),
                                 band_ends=ends, position=i, run_ranks=len(self.ranks), keep=k)
                      for i, (r, p, tl, c, k) in enumerate(zip(self.ranks, joint.predictions, joint.timelines,
                                                               joint.clocks, keeps)))
        warnings = tuple(dict.fromkeys([w for p in preds for w in p.warnings] + self.host_warnings()
                                       + list(joint.warnings)))
        return Replay(target, ranks, joint.collectives, joint.passes, warnings)

    def scaled_out(self, target: Optional[GpuSpec]) -> Replay:
        """The one rank predicted on ``target`` (None: its origin GPU) as one of ``options.data_parallel``'s N ranks,
        the collectives priced over the target's interconnect (the deployment what-ifs applied); no rank waits for
        another (every rank runs this step), so the run's collectives table is empty."""
        from habitat_trace.pipeline.figures import iteration_and_fastest

        r = self.ranks[0]
        pred = predict(r.tables, r.origin, target if target is not None else r.origin)
        plan = self.options.data_parallel.plan(self.options.deployment)
        prepared = prepare(r.tables, pred, plan, r.params)
        out = scale_out(r.tables, pred, plan, r.clock.clock, r.params, prepared=prepared)
        # the record keeps the host the user gave (its speed); a DDP rank's slowest-host pace is the scale-out's
        # (document.scale_out_record)
        host = r.clock if out.clock is r.clock.clock else replace(r.clock, clock=replace(out.clock,
                                                                                         speed=r.clock.clock.speed))

        band = hostband.slowest_of(r.band, plan.world_size)  # every collective waits for the slowest rank's host

        def iterate(clocks: Sequence[CpuClock]) -> list[tuple[float, float]]:  # the slow end: the worst contention
            o = scale_out(r.tables, pred, plan, clocks[0], r.params, worst_contention=clocks[0] is band.slow,
                          prepared=prepared)
            return [iteration_and_fastest(o.synthesized.tables, o.timeline)]
        rr = RankReplay(r, out.synthesized.prediction, out.timeline, host, out, BandEnds(iterate, [band]))
        none = pd.DataFrame(columns=["rank", "row", "key", "collective", "transfer_ns", "wait_ns"])
        return Replay(target, (rr,), none, 0, tuple(dict.fromkeys(list(out.warnings) + self.host_warnings())))

    def scale_out_split(self, target: Optional[GpuSpec]) -> dict[str, float]:
        """Where a ``--world-size N`` step's time goes on ``target`` (None: the origin GPU), ms: the one-GPU step
        replayed there, then what each part of the scale-out adds, replayed cumulatively so that the parts sum to
        the N-rank iteration: ``communication_ms`` (the collectives and the copies DDP/FSDP add, exposed on the
        GPU; no host cost, no contention), ``host_work_ms`` (their issue and the hooks on the host:
        scale/dp_host.py), ``interference_ms`` (compute kernels slowed where a collective's channels hold SMs)."""
        r = self.ranks[0]
        pred = predict(r.tables, r.origin, target if target is not None else r.origin)
        plan = self.options.data_parallel.plan(self.options.deployment)
        one_ms = r.alone_ms(pred, r.clock.clock)

        prepared = prepare(r.tables, pred, plan, r.params)
        quiet = replace(prepared, channels=0)  # no contention

        def it(p: Prepared, host: bool) -> float:
            o = scale_out(r.tables, pred, plan, r.clock.clock, r.params, host_work=host, prepared=p)
            return iteration_figures(o.synthesized.tables, o.timeline)[0]
        comm, hosted, full = it(quiet, False), it(quiet, True), it(prepared, True)
        return {"one_gpu_ms": one_ms, "communication_ms": comm - one_ms, "host_work_ms": hosted - comm,
                "interference_ms": full - hosted, "iteration_ms": full}

    def host_warnings(self) -> list[str]:
        """The profiler-overhead estimate's warnings of every rank's host clock (an extrapolated unit, an estimate
        above 60% of a step: timeline/overhead.py), so that every row the clock serves says so."""
        several = len(self.ranks) > 1
        return [f"rank {r.number}: {w}" if several else w for r in self.ranks for w in r.clock.warnings]


@dataclass(frozen=True)
class Unread:
    """A trace of a directory that could not be read: its path and the error (the rest of the directory goes on)."""

    path: Path
    error: HabitatTraceError


def one_run(runs: Sequence[Run], path: object) -> Run:
    """The one run a command (compare, explain, validate) reads; an error naming ``path`` when there are several."""
    if len(runs) > 1:
        raise TraceFormatError(
            f"{path}: {len(runs)} traces of different runs (no distributedInfo, or world size 1, or several "
            "ranks of one number); this command reads one run: a trace, or a directory of one trace per rank "
            "recorded after torch.distributed.init_process_group (`habitat-trace scale DIR` scales independent "
            "traces)")
    return runs[0]


def trace_files(path: Path) -> list[Path]:
    """A file: itself; a directory: its traces (*.json, *.json.gz but REPORT_NAME), sorted; one error when there
    are none."""
    if not path.is_dir():
        return [path]
    files = sorted({p for g in TRACE_GLOBS for p in path.glob(g) if p.is_file() and p.name != REPORT_NAME})
    if not files:
        raise TraceFormatError(f"{path}: no trace files (*.json, *.json.gz) in this directory; "
                               "put one torch.profiler trace per rank there")
    return files


def group_ranks(files: Sequence[Path], infos: Sequence[Optional[DistributedInfo]]) -> list[list[Path]]:
    """The runs among ``files``: the traces of a distributed run (distributedInfo, world size > 1) form one run,
    ordered by rank (two traces of one rank: an error naming both); every other trace is a run of its own."""
    ranks: dict[int, Path] = {}
    alone: list[list[Path]] = []
    for f, info in zip(files, infos):
        if info is None or info.world_size <= 1:
            alone.append([f])
        elif info.rank in ranks:
            raise TraceFormatError(f"{f}: rank {info.rank} also in {ranks[info.rank].name}; keep one trace per "
                                   "rank in the directory")
        else:
            ranks[info.rank] = f
    return ([[ranks[r] for r in sorted(ranks)]] if ranks else []) + alone


def runs_in(path: Path) -> list[list[Path]]:
    """``group_ranks`` of a file or directory, reading each trace's top-level keys only (for ``scale DIR``, which
    loads each run where it is scaled). A trace whose keys cannot be read is a run of its own: loading it fails
    there, with its error."""
    files = trace_files(path)
    if len(files) == 1:
        return [files]
    return group_ranks(files, [_distributed(f) for f in files])


def _distributed(path: Path) -> Optional[DistributedInfo]:
    head = _head_keys(path)
    if head is not None and "distributedInfo" in head:
        return DistributedInfo.from_meta(head)
    try:
        return DistributedInfo.from_meta(reader.read_meta(path))
    except HabitatTraceError:
        return None


# Kineto writes distributedInfo before traceEvents: the document's first bytes tell a rank's place without reading
# (and scanning) the rest, which for a directory of large ranks was the parent process's peak (docs/performance.md)
HEAD_BYTES = 4 << 20


def _head_keys(path: Path) -> Optional[dict]:
    """The top-level keys before ``traceEvents`` from the document's first HEAD_BYTES; None when they are not there
    (read_meta then reads the whole document)."""
    import gzip
    import zlib

    import orjson

    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            raw = f.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    at = raw.find(b'"traceEvents"')
    if at < 0:
        return None
    try:
        head = orjson.loads(raw[:at].rstrip().rstrip(b",") + b"}")
    except orjson.JSONDecodeError:
        return None
    return head if isinstance(head, dict) else None

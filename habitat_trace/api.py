"""The Python API, the front door: ``open(path, **options) -> Trace``, a trace file or a directory of one trace per
rank (pipeline.Run: a file is a run of one rank), with the options every command takes by their keyword
(pipeline.options.Options.of: ``specs``, ``origin``, ``cpu_speed``, ``keep_profiler_overhead``, ``interconnect``,
``gpus_per_node``, ``nodes``, ``world_size``, ``strategy``, ``bucket_mb``, ``fsdp_wrap``,
``broadcast_buffers``). A Trace's methods return results and print nothing: ``inspect`` (the figures of each rank),
``compare`` (a DataFrame, a row per GPU), ``explain``, ``validate`` (against a measured trace) and ``scale`` (the run
as it would run on another GPU: the replayed target timeline, the same document ``habitat-trace scale`` writes, with
the Prediction that made it); ``.kernels`` / ``.ops`` are pandas DataFrames with int64 ns times and a ``rank`` column.
The commands are these methods and their tables.

Examples run as doctests (tests/test_api.py) from the repository root:

>>> import habitat_trace
>>> t = habitat_trace.open("tests/data/mlp_b32_fp32.pt.trace.json.gz")
>>> t.gpu
'H100 SXM5 80GB'
>>> a100 = t.scale(to="A100")
>>> a100.gpu, len(a100.kernels) == len(t.kernels)
('A100 SXM4 80GB', True)
>>> sorted(a100.kernels["method"].unique())  # another chip: every kernel at what the A100 sustains
['sustained']
>>> list(t.compare(["A100", "L4"])["gpu"])
['H100 SXM5 80GB', 'A100 SXM4 80GB', 'L4']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.errors import HabitatTraceError, OutputError
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import Tables
from habitat_trace.pipeline import Options, Run
from habitat_trace.pipeline.run import Replay, catalog_gpu
from habitat_trace.scale.prediction import Prediction

if TYPE_CHECKING:
    from habitat_trace.analysis.explain import Explanation
    from habitat_trace.analysis.validate import Validation

CHAIN_SEP = " > "  # op_chain: outermost op first, the launching op last

KERNEL_COLUMNS = {  # API column <- ingest column
    "name": S.NAME, "class": S.KCLASS, "cat": S.CAT, "device": S.DEVICE, "stream": S.STREAM,
    "start_ns": S.TS, "dur_ns": S.DUR, "grid_x": S.GRID_X, "grid_y": S.GRID_Y, "grid_z": S.GRID_Z,
    "block_x": S.BLOCK_X, "block_y": S.BLOCK_Y, "block_z": S.BLOCK_Z, "registers_per_thread": S.REGISTERS,
    "shared_mem_bytes": S.SHARED_MEM, "op": S.OP_NAME,
}
OP_COLUMNS = {
    "name": S.NAME, "cat": S.CAT, "pid": S.PID, "tid": S.TID, "start_ns": S.TS, "dur_ns": S.DUR,
    "depth": S.DEPTH, "parent": S.PARENT, "input_dims": S.INPUT_DIMS, "input_types": S.INPUT_TYPES,
}


def open(path: str | Path, **options: Any) -> "Trace":
    """Read a torch.profiler (Kineto) trace, ``.json`` or ``.json.gz``, or a directory of one per rank, to be
    predicted with ``options`` (module doc; the CLI's options by their keyword, ``--from`` as ``origin``).

    >>> t = open("tests/data/mlp_b32_fp32.pt.trace.json.gz")
    >>> t
    Trace('mlp_b32_fp32.pt.trace.json.gz', gpu='H100 SXM5 80GB', kernels=134, steps=2)
    >>> open("tests/data/mlp_b32_fp32.pt.trace.json.gz", world_size=8, strategy="fsdp").options.data_parallel
    DataParallel(world_size=8, strategy='fsdp', bucket_mb=25.0, fsdp_wrap='blocks', broadcast_buffers=True)
    """
    return Trace.read(path, Options.of(**options))


load = open  # its name before issue 33


def compare(trace_or_path: "Trace | str | Path", to: str | Sequence[str], prices: Optional[dict[str, float]] = None,
            progress: Optional[Callable[[str], None]] = None, **options: Any) -> pd.DataFrame:
    """``open(trace_or_path, **options).compare(to, prices, progress)``; a Trace is compared with its options
    changed by ``options``. A directory of the ranks of one run is compared one rank's tables at a time
    (pipeline/fanout.py: the same rows)."""
    if not isinstance(trace_or_path, Trace):
        from habitat_trace.pipeline.fanout import rank_files

        opts = Options.of(**options)
        files = [] if opts.data_parallel.active else rank_files(Path(trace_or_path))
        if files:
            return _fanned(files, opts, to, prices, progress)
        trace_or_path = open(trace_or_path, **options)
    elif options:
        trace_or_path = trace_or_path.with_options(**options)
    return trace_or_path.compare(to, prices, progress)


def _fanned(files: list[Path], options: Options, to: str | Sequence[str], prices: Optional[dict[str, float]],
            progress: Optional[Callable[[str], None]]) -> pd.DataFrame:
    from habitat_trace.analysis.compare import ranks_table
    from habitat_trace.pipeline.fanout import LocalPool

    targets = options.targets(to)  # unknown names fail before any work
    return ranks_table(files, options, targets, LocalPool(1), _overrides(options, prices), progress)


def _overrides(options: Options, prices: Optional[dict[str, float]]) -> dict[str, float]:
    """``prices`` keyed by the catalog's name of each GPU."""
    return {options.catalog.resolve(n).name: float(usd) for n, usd in (prices or {}).items()}


@dataclass(frozen=True)
class Trace:
    """A loaded run (one trace, or one per rank), or (``replay`` set) the run scaled to another GPU."""

    run: Run = field(repr=False)  # its tables are the target's when scaled
    replay: Optional[Replay] = field(default=None, repr=False)
    scaled_from: Optional[Run] = field(default=None, repr=False)  # what ``scale`` was called on

    @classmethod
    def read(cls, path: str | Path | Sequence[Path], options: Options) -> "Trace":
        """The run of a trace file, a directory of one trace per rank, or the files of one run (Run.open)."""
        return cls(Run.open(path, options))

    def __repr__(self) -> str:
        tables = [r.tables for r in self.run.ranks]
        kernels = sum(int((t.gpu[S.CAT] == S.CAT_KERNEL).sum()) for t in tables)
        copies = sum(len(t.gpu) for t in tables) - kernels
        ranks = f", ranks={len(tables)}" if len(tables) > 1 else ""
        scaled = f", scaled_from={self.replay.ranks[0].origin.name!r}" if self.replay else ""
        return (f"Trace({self.path.name!r}, gpu={self.gpu!r}{ranks}, kernels={kernels}"
                + (f", copies_and_sets={copies}" if copies else "") + f", steps={len(tables[0].steps)}{scaled})")

    @property
    def options(self) -> Options:
        """What the run is predicted with (open's keywords, as Options)."""
        return self.run.options

    def with_options(self, **options: Any) -> "Trace":
        """These traces with some options changed (open's keywords): a loaded trace (a scaled one's replay is not
        carried over)."""
        return Trace(self.run.under(self.options.but(**options)))

    @property
    def path(self) -> Path:
        """The file (or directory) this trace was read from (for a scaled trace: the origin's)."""
        return self.run.source

    @property
    def tables(self) -> Tables:
        """The ingest tables of a one-rank trace (of the target document when scaled)."""
        return self.run.ranks[self._position()].tables

    @property
    def prediction(self) -> Optional[Prediction]:
        """The prediction of a scaled one-rank trace (None when not scaled)."""
        return None if self.replay is None else self.replay.ranks[self._position()].prediction

    @property
    def gpu(self) -> Optional[str]:
        """Catalog name of the GPU the times are for (None when the trace's device is not in the catalog)."""
        if self.replay is not None:
            return self.replay.gpu.name
        t = self.run.ranks[0].tables
        catalog = self.run.options.catalog
        spec = catalog_gpu(catalog, t.device_name) or catalog.for_properties(t.device_properties)
        return spec.name if spec else None

    @property
    def kernels(self) -> pd.DataFrame:
        """GPU events (kernels, copies, sets), one row each, in trace order, rank after rank.

        Columns: rank, name, class, cat, device, stream, start_ns, dur_ns, grid_*/block_*, registers_per_thread,
        shared_mem_bytes, op (the launching op), op_chain (outermost first, " > "), step (ProfilerStep
        number, -1 outside steps); a scaled trace adds method, reason, origin_start_ns, origin_dur_ns.

        >>> k = open("tests/data/mlp_b32_fp32.pt.trace.json.gz").kernels
        >>> k.loc[0, "class"], k.loc[0, "op"], int(k.loc[0, "step"])
        ('gemm', 'aten::addmm', 3)
        >>> k.loc[0, "op_chain"]
        'ProfilerStep#3 > aten::linear > aten::addmm'
        """
        return pd.concat([self._kernels(i) for i in range(len(self.run.ranks))], ignore_index=True)

    def _kernels(self, i: int) -> pd.DataFrame:
        t = self.run.ranks[i].tables
        g = t.gpu
        out = pd.DataFrame({"rank": self._rank(i), **{api: g[col].to_numpy() for api, col in KERNEL_COLUMNS.items()}})
        out["op_chain"] = op_chains(t.ops, g[S.OP].to_numpy())
        out["step"] = step_numbers(t.steps, g[S.STEP].to_numpy())
        if self.replay is not None and self.scaled_from is not None:
            # what was replayed: the origin's tables, or with world_size > 1 the synthesized rank's
            p, origin = self.replay.ranks[i].prediction, self.replay.ranks[i].tables
            out["method"] = p.method
            out["reason"] = p.reason
            out["origin_start_ns"] = origin.gpu[S.TS].to_numpy()
            out["origin_dur_ns"] = origin.gpu[S.DUR].to_numpy()
        return out

    @property
    def ops(self) -> pd.DataFrame:
        """CPU ops and user annotations: rank, name, cat, pid, tid, start_ns, dur_ns, depth, parent (row, -1 for
        none), input_dims, input_types, step (ProfilerStep number, -1 outside steps).

        >>> ops = open("tests/data/mlp_b32_fp32.pt.trace.json.gz").ops
        >>> int((ops["name"] == "aten::addmm").sum())  # 8 layers, 2 steps
        16
        """
        frames = []
        for i, r in enumerate(self.run.ranks):
            o = r.tables.ops
            out = pd.DataFrame({"rank": self._rank(i), **{api: o[col].to_numpy() for api, col in OP_COLUMNS.items()}})
            out["step"] = step_numbers(r.tables.steps, o[S.STEP].to_numpy())
            frames.append(out)
        return pd.concat(frames, ignore_index=True)

    def inspect(self, top: int = 10) -> list[dict[str, Any]]:
        """What ``habitat-trace inspect`` shows, one dict per rank (analysis.report.summarize), in rank order: the
        origin step its first row of ``compare`` reports (the run's own replay: a directory's ranks jointly); a
        scaled trace adds ``scaled`` (origin, target, methods per kernel, the prediction's warnings).

        >>> [s["steps"]["count"] for s in open("tests/data/mlp_b32_fp32.pt.trace.json.gz").inspect()]
        [2]
        """
        from habitat_trace.analysis.report import summarize

        run = self.run if not self.options.data_parallel.active else self.run.under(self.options.but(world_size=1))
        try:  # the origin step, as compare's first row: what the trace records, not a scale-out of it
            origin: Optional[Replay] = run.baseline()
        except HabitatTraceError:  # its GPU is not in the catalog (--from), or nothing to replay: no origin step
            origin = None
        out = []
        for i, rank in enumerate(self.run.ranks):
            s = summarize(rank.tables, top, None if origin is None else origin.ranks[i].headline)
            if self.replay is not None:
                p = self.replay.ranks[i].prediction
                s["scaled"] = {"origin": p.origin.name, "target": p.target.name, "methods": p.method_counts(),
                               "warnings": list(p.warnings)}
            out.append(s)
        return out

    def summary(self, top: int = 10, rank: Optional[int] = None) -> dict[str, Any]:
        """``inspect``'s dict of one trace (``rank``: which, when there are several).

        >>> s = open("tests/data/mlp_b32_fp32.pt.trace.json.gz").summary()
        >>> s["origin"]["name"], s["steps"]["count"], s["kernels"]["count"]
        ('NVIDIA H100 80GB HBM3', 2, 134)
        """
        return self.inspect(top)[self._position(rank)]

    def compare(self, to: str | Sequence[str], prices: Optional[dict[str, float]] = None,
                progress: Optional[Callable[[str], None]] = None) -> pd.DataFrame:
        """One row per GPU, the origin first, then ``to`` in order, each once (analysis.compare.gpu_table: the
        columns). ``prices`` maps a GPU name (any name the catalog resolves) to USD per hour over the catalog's;
        ``progress`` is called with each GPU's name once its row is done."""
        from habitat_trace.analysis.compare import gpu_table

        targets = self.options.targets(to)  # unknown names fail before any work
        return gpu_table(self.run, targets, _overrides(self.options, prices), progress)

    def explain(self, to: str | Sequence[str], top: int = 15) -> "Explanation":
        """Which ops and kernels change most on each GPU of ``to``, and why (analysis.explain: its tables)."""
        from habitat_trace.analysis.explain import explain

        return explain(self.run, self.options.targets(to), top=top)

    def validate(self, measured: "Trace | str | Path", top: int = 10) -> "Validation":
        """This trace (a prediction ``scale`` wrote) against ``measured`` (a Trace, or a path read with these
        options): step, op and kernel errors, a ``rank`` column pairing the ranks (analysis.validate)."""
        from habitat_trace.analysis.validate import validate_runs

        other = measured if isinstance(measured, Trace) else Trace.read(measured, self.options)
        return validate_runs(self.run, other.run, top=top)

    def scale(self, to: str = "A100", **options: Any) -> "Trace":
        """The run as it would run on GPU ``to`` (a catalog name or alias), predicted with this trace's options
        changed by ``options`` (open's keywords: e.g. ``cpu_speed``, ``keep_profiler_overhead``, or
        ``world_size`` > 1, ``strategy``, ``bucket_mb``, ``fsdp_wrap``: a one-GPU trace as one of N data-parallel
        ranks, the added communication among the kernels). A scaled trace runs on its target, its host as the target's.

        >>> t = open("tests/data/mlp_b32_fp32.pt.trace.json.gz")
        >>> l4 = t.scale(to="L4")
        >>> l4.summary()["steps"]["mean"]["gpu_busy_ms"] > t.summary()["steps"]["mean"]["gpu_busy_ms"]
        True
        >>> ddp = t.scale(to="H100", world_size=8)
        >>> k = ddp.kernels
        >>> int((k["method"] == "collective-synthesized").sum())  # 2 DDP buckets per step (1 MiB first), 2 steps
        4
        """
        from habitat_trace.pipeline.document import target_tables

        run = self.run.under(self.options.but(**options)) if options else self.run
        targets = run.options.targets(to)
        if len(targets) != 1:
            raise HabitatTraceError(f"scale(to={to!r}): name one GPU; for several, call scale once per GPU")
        replay = run.replay(targets[0])
        # the scaled run is as written: its collectives are in it (a second scale-out would refuse it), its host
        # the target's (a second --cpu-speed applies to it)
        scaled = run.under(run.options.but(origin=targets[0], world_size=1, cpu_speed=1.0),
                           [target_tables(rr) for rr in replay.ranks])
        return Trace(scaled, replay, run)

    def write(self, path: str | Path) -> Path:
        """Write the trace (gzip when ``path`` ends with .gz): a loaded trace as read (same bytes when the
        compression matches), a scaled one as ``habitat-trace scale`` writes it; a run of several ranks into the
        existing directory ``path``, one file per rank. Returns the path.

        >>> import tempfile, os
        >>> out = os.path.join(tempfile.mkdtemp(), "mlp.a100.pt.trace.json.gz")
        >>> open("tests/data/mlp_b32_fp32.pt.trace.json.gz").scale(to="A100").write(out).name
        'mlp.a100.pt.trace.json.gz'
        >>> open(out).kernels["class"].equals(open("tests/data/mlp_b32_fp32.pt.trace.json.gz").kernels["class"])
        True
        """
        from habitat_trace.emit.writer import copy_trace, write_trace
        from habitat_trace.pipeline.document import output_name, target_document

        out = Path(path)
        if not self.run.single and not out.is_dir():
            raise OutputError(f"{out}: a run of {len(self.run.ranks)} ranks is written one file per rank into an "
                              "existing directory; create it first")
        for i, rank in enumerate(self.run.ranks):
            dest = out if self.run.single else out / (rank.path.name if self.replay is None else
                                                        output_name(rank.path, self.replay.gpu))
            if self.replay is None:
                copy_trace(rank.path, dest)
            else:
                write_trace(target_document(self.replay.ranks[i]), dest)
        return out

    def _rank(self, i: int) -> int:
        number = self.run.ranks[i].number
        return number if number is not None else i

    def _position(self, rank: Optional[int] = None) -> int:
        if rank is None:
            if not self.run.single:
                raise HabitatTraceError(f"{self.path}: a run of {len(self.run.ranks)} ranks; pass rank=")
            return 0
        numbers = [self._rank(i) for i in range(len(self.run.ranks))]
        if rank not in numbers:
            raise HabitatTraceError(f"{self.path}: no rank {rank} (ranks {numbers})")
        return numbers.index(rank)


def op_chains(ops: pd.DataFrame, op: np.ndarray) -> np.ndarray:
    """For each op row in ``op`` (-1: none), its enclosing op names joined outermost first ("" for none)."""
    names = ops[S.NAME].to_numpy(dtype=object)
    parent = ops[S.PARENT].to_numpy()
    chains = np.full(len(op), "", dtype=object)
    cur = np.asarray(op, dtype=np.int64).copy()
    live = cur != S.NONE
    while live.any():  # one pass per nesting level, vectorized over kernels
        tail = np.where(chains[live] == "", "", CHAIN_SEP + chains[live])
        chains[live] = names[cur[live]] + tail
        cur[live] = parent[cur[live]]
        live = cur != S.NONE
    return chains


def step_numbers(steps: pd.DataFrame, step_rows: np.ndarray) -> np.ndarray:
    """ProfilerStep numbers for rows of the steps table (-1 stays -1)."""
    rows = np.asarray(step_rows, dtype=np.int64)
    if len(steps) == 0:
        return np.full(len(rows), S.NONE, dtype=np.int64)
    numbers = steps[S.STEP_NUMBER].to_numpy(dtype=np.int64)
    return np.where(rows != S.NONE, numbers[np.maximum(rows, 0)], S.NONE)

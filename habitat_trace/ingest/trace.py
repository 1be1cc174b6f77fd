"""``load(path) -> Tables``: a Kineto trace as linked, typed tables, built once.

The raw events are kept read-only (``Events``: the document's bytes, parsed on access; a list when the
trace came as a parsed document or needed the whole-document parse) so emit can rewrite every original
event with new times. Tables are built chunk by chunk (ingest.assemble): the parsed event dicts of a
large trace are never all alive at once.
"""
from __future__ import annotations

import gc
import hashlib
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence, TypeVar

import numpy as np
import orjson
import pandas as pd

from habitat_trace.errors import TraceFormatError, UnsupportedTraceError
from habitat_trace.ingest import classify, linking, reader, rocm, rules
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.assemble import Parts
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.events import ChunkError, Events, FileStamp
from habitat_trace.ingest.halves import assemble_events

T = TypeVar("T")
CAT_PROFILER_RANGE = "cuda_profiler_range"  # CUPTI range-profiler events (kineto ActivityType CUDA_PROFILER_RANGE)


class KernelTables(Protocol):
    """What the scale engine reads of a trace: the GPU events and the CPU ops that launched them (columns and
    dtypes in schema.py). ``Tables`` is one; tests may build just these two tables."""

    @property
    def gpu(self) -> pd.DataFrame: ...

    @property
    def ops(self) -> pd.DataFrame: ...


@dataclass(frozen=True)
class DistributedInfo:
    """The trace-level ``distributedInfo`` of a torch.distributed run (absent: a single-process trace)."""

    rank: int
    world_size: int
    backend: str
    nccl_version: str

    @staticmethod
    def from_meta(meta: dict[str, Any]) -> Optional["DistributedInfo"]:
        info = meta.get("distributedInfo")
        if not isinstance(info, dict):
            return None
        rank, world = info.get("rank"), info.get("world_size")
        if not isinstance(rank, int) or not isinstance(world, int) or isinstance(rank, bool):
            return None
        return DistributedInfo(rank=rank, world_size=world, backend=str(info.get("backend", "")),
                               nccl_version=str(info.get("nccl_version", "")))


@dataclass(frozen=True)
class Tables:
    """A loaded trace as linked columnar tables (columns and dtypes in schema.py), with its raw events and top-level
    keys; what every layer above reads. The user-facing ``Trace`` (api.py) wraps one or more of these."""

    path: Path
    meta: dict[str, Any]  # top-level keys except traceEvents
    devices: list[dict[str, Any]]  # deviceProperties
    events: Sequence[Any] = field(repr=False)  # raw traceEvents, read-only (ingest.events.Events or a list)
    event_ts_ns: np.ndarray = field(repr=False)  # per event: origin ts, NO_TIME where none (tables.event_times)
    event_dur_ns: np.ndarray = field(repr=False)  # per event: origin dur, NO_TIME where none
    gpu: pd.DataFrame = field(repr=False)  # kernels, copies, sets
    ops: pd.DataFrame = field(repr=False)  # cpu_op + user_annotation
    calls: pd.DataFrame = field(repr=False)  # cuda_runtime + cuda_driver
    steps: pd.DataFrame = field(repr=False)
    syncs: pd.DataFrame = field(repr=False)  # cuda_sync
    gpu_annotations: pd.DataFrame = field(repr=False)
    flows: pd.DataFrame = field(repr=False)
    memory: pd.DataFrame = field(repr=False)
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)  # by event: NCCL fields
    # times written in ``events`` when they differ from event_ts_ns/event_dur_ns (tables retimed to a target
    # GPU in memory, pipeline.document.target_tables); None: the same
    raw_ts_ns: np.ndarray | None = field(default=None, repr=False)
    raw_dur_ns: np.ndarray | None = field(default=None, repr=False)

    def raw_times(self) -> tuple[np.ndarray, np.ndarray]:
        """(ts, dur) in ns per event as written in ``events`` (NO_TIME where absent)."""
        if self.raw_ts_ns is None or self.raw_dur_ns is None:
            return self.event_ts_ns, self.event_dur_ns
        return self.raw_ts_ns, self.raw_dur_ns
    vendor: str = "nvidia"  # "amd" for a ROCm trace (ingest.rocm): launch parameters from the hip* call
    # the Perfetto-rule violations of ``events`` as written (ingest.rules, found while ingest parsed them); None:
    # not checked (tables built elsewhere)
    violations: Optional[tuple[rules.Violation, ...]] = field(default=None, repr=False)
    _derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def derived(self, build: Callable[["Tables"], T]) -> T:
        """``build(self)``, built once per Tables and ``build``: what a pure function of the tables derives for every
        replay or target alike (the timeline's stream links, the engine's op costs). Tables are read-only once
        built, so it never goes stale."""
        if build not in self._derived:
            self._derived[build] = build(self)
        return self._derived[build]

    def with_times(self, ts_ns: np.ndarray, dur_ns: np.ndarray, sharing: Sequence[Callable[[Any], Any]]) -> "Tables":
        """These tables with other event times (``event_ts_ns``, ``event_dur_ns``), sharing what the ``sharing``
        builders derived (they must read no event time: timeline.replay.times_view)."""
        out = replace(self, event_ts_ns=ts_ns, event_dur_ns=dur_ns)
        for build in sharing:
            out._derived[build] = self.derived(build)
        return out

    @property
    def device_name(self) -> str | None:
        """Name of the GPU most kernels ran on, from deviceProperties (None when absent)."""
        if not self.devices:
            return None
        dev = int(self.gpu[S.DEVICE].mode().iloc[0]) if len(self.gpu) else 0
        for d in self.devices:
            if d.get("id") == dev:
                return str(d.get("name"))
        return str(self.devices[0].get("name"))

    @property
    def distributed(self) -> Optional[DistributedInfo]:
        """Rank, world size, backend and NCCL version from ``distributedInfo`` (None when absent or malformed)."""
        return DistributedInfo.from_meta(self.meta)

    @property
    def device_properties(self) -> dict[str, Any]:
        name = self.device_name
        return next((d for d in self.devices if str(d.get("name")) == name), {})


def derived(trace: Any, build: Callable[[Any], T]) -> T:
    """``trace.derived(build)`` for Tables; ``build(trace)`` for any other object with the same tables (tests
    build small ones)."""
    memo = getattr(trace, "derived", None)
    return memo(build) if memo is not None else build(trace)


def load(path: str | Path, require_gpu: bool = True) -> Tables:
    """The tables of the trace at ``path``. The events of a plain file are read again from it when asked: their
    bytes (1x the file) are dropped once parsed (Events.release), before the tables are joined and linked."""
    path = Path(path)
    raw, stamp = reader.read_stamped(path)
    split = reader.split_document(raw)
    with gc_paused():
        if split is not None:
            del raw  # the events hold the bytes now
            try:
                return _build(path, *split, require_gpu, stamp)
            except ChunkError:  # a chunk orjson refuses (NaN, bad UTF-8): the whole-document parse decides
                raw = reader.read_bytes(path)
        doc = reader.parse_document(path, raw)
        del raw
        return _build(path, _meta(doc), doc["traceEvents"], require_gpu)


def from_document(path: str | Path, doc: dict[str, Any], require_gpu: bool = True) -> Tables:
    """The tables of a Kineto document already in memory (``path`` names it in messages): what the scale-out
    synthesis (timeline/commstream.py) builds after adding its communication events. A document equal to one whose
    tables are still in use gets those tables (_BUILT)."""
    try:
        key: Optional[bytes] = hashlib.blake2b(orjson.dumps([str(path), require_gpu, doc])).digest()
    except (TypeError, orjson.JSONEncodeError):  # what orjson cannot write is built every time
        key = None
    if key is not None and (known := _BUILT.get(key)) is not None:
        return known
    with gc_paused():
        tables = _build(Path(path), _meta(doc), doc["traceEvents"], require_gpu)
    if key is not None:
        _BUILT[key] = tables
    return tables


# The tables from_document built, by their document's digest, while something holds them: the scale-out builds the
# same document for the central replay and for each end of the host band (timeline/scaleout.scale_out synthesizes
# per clock), and its tables cost most of a replay. Equal JSON gives equal tables, and tables are read-only.
_BUILT: "weakref.WeakValueDictionary[bytes, Tables]" = weakref.WeakValueDictionary()


def _meta(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "traceEvents"}


@contextmanager
def gc_paused() -> Iterator[None]:
    """Parsing and building the tables allocate millions of dicts, lists and tuples; each automatic
    collection rescans all that are alive, so time grows with the square of the trace size. Nothing
    made here is cyclic garbage, so collection waits until the end. Measured on a 326 MB trace:
    orjson.loads 6.3-7.0 s with the collector on, 2.8 s with it paused; table building -30%."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # Everything allocated meanwhile counts as "young": the first collection after gc.enable()
        # would scan all of it (1.5 s at 326 MB). freeze+unfreeze files it in the oldest generation
        # instead, where it would land anyway after surviving two collections.
        if gc.get_freeze_count() == 0:  # never unfreeze what the caller froze
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def _assemble(events: Sequence[Any], path: Path, stamp: Optional[FileStamp]) -> Parts:
    """The events' tables (read a part at a time: Events.read; a large trace's halves in two processes:
    halves.assemble_events); once read, before the tables are joined, their bytes are dropped when ``path`` holds
    them (``stamp``), once the python_function events are counted in them (what the overhead estimate asks of every
    trace: from memory, not from the file again)."""
    def release() -> None:
        if stamp is not None and isinstance(events, Events):
            events.text_count(S.PYTHON_TOKEN)
            events.release(path, stamp)

    return assemble_events(events, release)


def _build(path: Path, meta: dict[str, Any], events: Sequence[Any], require_gpu: bool,
           stamp: Optional[FileStamp] = None) -> Tables:
    """``stamp``: ``path`` holds the events' bytes (reader.read_stamped): they are dropped once parsed."""
    devices = meta.get("deviceProperties") or []
    if not isinstance(devices, list):
        devices = []
    devices = [d for d in devices if isinstance(d, dict)]
    parts = _assemble(events, path, stamp)
    for what, df in (("GPU event", parts.gpu), ("CPU op", parts.ops), ("runtime call", parts.calls)):
        _check_times(path, what, df, events)
    if require_gpu and len(parts.gpu) == 0:
        _refuse_without_kernels(path, events)
    trace = Tables(path=path, meta=meta, devices=devices, events=events, event_ts_ns=parts.ts_ns,
                  event_dur_ns=parts.dur_ns, gpu=parts.gpu, ops=parts.ops, calls=parts.calls,
                  steps=pd.DataFrame(), syncs=parts.syncs, gpu_annotations=parts.gpu_annotations,
                  flows=parts.flows, memory=parts.memory, collectives=parts.collectives,
                  vendor="amd" if rocm.is_rocm(devices, parts.hip) else "nvidia", violations=parts.violations)
    return _link(trace)


def _link(t: Tables) -> Tables:
    ops, calls, gpu = t.ops, t.calls, t.gpu
    parent, depth = linking.op_parents(ops)
    ops[S.PARENT], ops[S.DEPTH] = parent, depth
    steps = linking.step_table(ops)
    is_step = np.zeros(len(ops), dtype=bool)
    is_step[steps["op"].to_numpy()] = True
    ops[S.ROOT_OP] = linking.root_ops(parent, is_step)
    ops[S.END] = ops[S.TS] + ops[S.DUR]
    ops[S.STEP] = linking.step_of(steps, ops[S.TS].to_numpy())

    calls[S.END] = calls[S.TS] + calls[S.DUR]
    calls[S.OP] = linking.enclosing_op(ops, parent, calls[S.PID], calls[S.TID], calls[S.TS].to_numpy())
    calls[S.STEP] = linking.step_of(steps, calls[S.TS].to_numpy())

    gpu[S.END] = gpu[S.TS] + gpu[S.DUR]
    launch = linking.first_row_by_key(calls[S.CORRELATION].to_numpy(), gpu[S.CORRELATION].to_numpy())
    has = launch != S.NONE
    gpu[S.LAUNCH] = launch
    if t.vendor == "amd":
        gpu = rocm.launch_params(gpu, calls, launch)
    safe = np.maximum(launch, 0)
    gpu[S.LAUNCH_NAME] = np.where(has, calls[S.NAME].to_numpy()[safe] if len(calls) else "", "")
    gpu[S.LAUNCH_TS] = np.where(has, calls[S.TS].to_numpy()[safe] if len(calls) else 0, S.NONE)
    gpu[S.LAUNCH_DUR] = np.where(has, calls[S.DUR].to_numpy()[safe] if len(calls) else 0, S.NONE)
    op = np.where(has, calls[S.OP].to_numpy()[safe] if len(calls) else S.NONE, S.NONE)
    # no launch recorded (or launched outside any op): fall back to the External id
    by_ext = linking.first_row_by_key(ops[S.EXTERNAL_ID].to_numpy(), gpu[S.EXTERNAL_ID].to_numpy())
    op = np.where(op == S.NONE, by_ext, op)
    gpu[S.OP] = op
    names = ops[S.NAME].to_numpy(dtype=object)
    gpu[S.OP_NAME] = np.where(op != S.NONE, names[np.maximum(op, 0)] if len(ops) else "", "")
    root = np.where(op != S.NONE, ops[S.ROOT_OP].to_numpy()[np.maximum(op, 0)] if len(ops) else S.NONE, S.NONE)
    gpu[S.ROOT_OP] = root
    gpu[S.ROOT_OP_NAME] = np.where(root != S.NONE, names[np.maximum(root, 0)] if len(ops) else "", "")
    # The step is where the work was launched: a kernel without a recorded launch (queued before
    # the profiling window opened) takes its op's step; only a trace with no launches at all
    # falls back to GPU time.
    if has.any() or len(gpu) == 0:
        step = linking.step_of(steps, gpu[S.LAUNCH_TS].to_numpy())
        op_step = ops[S.STEP].to_numpy()[np.maximum(op, 0)] if len(ops) else np.full(len(gpu), S.NONE)
        step = np.where(has, step, np.where(op != S.NONE, op_step, S.NONE))
    else:
        step = linking.step_of(steps, gpu[S.TS].to_numpy())
    gpu[S.STEP] = step
    gpu[S.KCLASS] = classify.classify(gpu[S.NAME], gpu[S.CAT], gpu[S.OP_NAME])
    gpu[S.LAUNCH_ISSUE] = drop_invalid_launch_params(gpu, registers_recorded=t.vendor != "amd")
    linked = Tables(path=t.path, meta=t.meta, devices=t.devices, events=t.events, event_ts_ns=t.event_ts_ns,
                   event_dur_ns=t.event_dur_ns, gpu=gpu, ops=ops, calls=calls, steps=steps, syncs=t.syncs,
                   gpu_annotations=t.gpu_annotations, flows=t.flows, memory=t.memory,
                   collectives=t.collectives, vendor=t.vendor, violations=t.violations)
    check_tables(linked)
    return linked


LAUNCH_LABELS = {S.REGISTERS: "registers per thread", S.SHARED_MEM: "shared memory", S.GRID_X: "grid",
                 S.BLOCK_X: "block"}  # the Kineto arg names


def check_tables(trace: Tables) -> None:
    """The typed boundary: every table has the columns and dtypes schema.TABLE_COLUMNS promises. A failure is our
    bug (the tables are built from any input), so it is a RuntimeError, not a user error."""
    for table, columns in S.TABLE_COLUMNS.items():
        df = getattr(trace, table)
        missing = [c for c in columns if c not in df.columns]
        wrong = [f"{c}: {df[c].dtype}" for c, kind in columns.items()
                 if len(df) and c in df.columns and df[c].dtype.kind != kind]
        if missing or wrong:
            raise RuntimeError(f"{trace.path}: ingest built table {table!r} off its schema "
                               f"(missing {missing}, wrong dtypes {wrong})")


def drop_invalid_launch_params(gpu: pd.DataFrame, registers_recorded: bool = True) -> np.ndarray:
    """Zero (= not recorded) the launch parameters of kernels whose recorded values are out of range (a negative
    register count or shared memory, a negative grid or block, over MAX_REGISTERS_PER_THREAD registers), so the
    engine takes its no-parameters rule for them instead of failing in the occupancy model; returns per row why
    ("" where the values were kept). Changes ``gpu`` in place (ingest's own table, being built). A ROCm trace
    records no registers (ingest.rocm writes -1 for "missing"): ``registers_recorded`` False accepts that."""
    launch = [S.GRID_X, S.GRID_Y, S.GRID_Z, S.BLOCK_X, S.BLOCK_Y, S.BLOCK_Z, S.REGISTERS, S.SHARED_MEM]
    issue = np.full(len(gpu), "", dtype=object)
    low = 0 if registers_recorded else S.NONE
    for column, bad in ((S.REGISTERS, (gpu[S.REGISTERS] < low) | (gpu[S.REGISTERS] > S.MAX_REGISTERS_PER_THREAD)),
                        (S.SHARED_MEM, gpu[S.SHARED_MEM] < 0),
                        (S.GRID_X, (gpu[[S.GRID_X, S.GRID_Y, S.GRID_Z]] < 0).any(axis=1)),
                        (S.BLOCK_X, (gpu[[S.BLOCK_X, S.BLOCK_Y, S.BLOCK_Z]] < 0).any(axis=1))):
        rows = bad.to_numpy() & (issue == "")
        if rows.any():
            label = LAUNCH_LABELS[column]
            issue[rows] = [f"{label} {v} out of range" for v in gpu[column].to_numpy()[rows]]
    dropped = issue != ""
    if dropped.any():
        gpu.loc[dropped, launch] = 0
    return issue


def _check_times(path: Path, what: str, df: pd.DataFrame, events: Sequence[Any]) -> None:
    bad = (df[S.TS].to_numpy() == NO_TIME) | (df[S.DUR].to_numpy() == NO_TIME) | (df[S.DUR].to_numpy() < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        ev = events[int(df[S.EVENT].iat[row])]
        raise TraceFormatError(
            f"{path}: {what} #{int(df[S.EVENT].iat[row])} {str(ev.get('name'))[:60]!r} has ts={ev.get('ts')!r} "
            f"dur={ev.get('dur')!r}; every event needs a finite ts and dur >= 0: fix or drop it, or export again"
        )


def _refuse_without_kernels(path: Path, events: Sequence[Any]) -> None:
    """No kernel/memcpy/memset events: a CUPTI range-profiler (counter) trace, or a CPU-only one."""
    # Kineto's CUPTI range profiler (experimental_config=_ExperimentalConfig(profiler_metrics=[...])) writes
    # each kernel (or range) as an event of category "cuda_profiler_range" carrying counter values, and no
    # CUDA activity records: no launch parameters, streams or launch links (kineto CuptiRangeProfiler.cpp)
    ranges = sum(1 for e in events if type(e) is dict and e.get("cat") == CAT_PROFILER_RANGE)
    if ranges:
        raise UnsupportedTraceError(
            f"{path}: a CUPTI performance-counter trace ({ranges} '{CAT_PROFILER_RANGE}' events, recorded with "
            "profiler_metrics): it has kernel counters but no kernel activity (launch parameters, streams); "
            "record a separate trace without experimental_config(profiler_metrics=...) and with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    raise UnsupportedTraceError(
        f"{path}: no GPU kernels in this trace (CPU-only profile); record it with "
        "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a CUDA device"
    )

"""The Python API: ``load(path) -> Trace``; ``Trace.scale(to=...)`` returns the trace as it would run on
another GPU (the replayed target timeline, the same document ``habitat-trace scale`` writes), with the
Prediction that made it; ``.kernels`` / ``.ops`` are pandas DataFrames with int64 ns times.

Examples run as doctests (tests/test_api.py) from the repository root:

>>> import habitat_trace
>>> t = habitat_trace.load("tests/data/mlp_b32_fp32.pt.trace.json.gz")
>>> t.gpu
'H100 SXM5 80GB'
>>> a100 = t.scale(to="A100")
>>> a100.gpu, len(a100.kernels) == len(t.kernels)
('A100 SXM4 80GB', True)
>>> sorted(a100.kernels["method"].unique())  # another chip: every kernel at what the A100 sustains
['sustained']
"""
from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from habitat_trace import pipeline
from habitat_trace.ingest import reader
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import Trace as Tables
from habitat_trace.scale.prediction import Prediction
from habitat_trace.scale.specs import Catalog
from habitat_trace.timeline.replay import Timeline

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


def load(path: str | Path) -> "Trace":
    """Read a torch.profiler (Kineto) trace, ``.json`` or ``.json.gz``.

    >>> t = load("tests/data/mlp_b32_fp32.pt.trace.json.gz")
    >>> t
    Trace('mlp_b32_fp32.pt.trace.json.gz', gpu='H100 SXM5 80GB', kernels=134, steps=2)
    """
    from habitat_trace.ingest import load as ingest_load

    return Trace(ingest_load(path))


@dataclass(frozen=True)
class Trace:
    """A loaded trace, or (``prediction`` set) a trace scaled to another GPU."""

    tables: Tables = field(repr=False)  # the ingest tables; of the target document when scaled
    prediction: Optional[Prediction] = field(default=None, repr=False)
    timeline: Optional[Timeline] = field(default=None, repr=False)
    scaled_from: Optional[Tables] = field(default=None, repr=False)  # what ``scale`` was called on
    spec_info: dict[str, Any] = field(default_factory=dict, repr=False)  # written into the output header

    def __repr__(self) -> str:
        scaled = f", scaled_from={self.prediction.origin.name!r}" if self.prediction else ""
        return (f"Trace({self.tables.path.name!r}, gpu={self.gpu!r}, kernels={len(self.tables.gpu)}, "
                f"steps={len(self.tables.steps)}{scaled})")

    @property
    def path(self) -> Path:
        """The file this trace was read from (for a scaled trace: the origin's file)."""
        return self.tables.path

    @property
    def gpu(self) -> Optional[str]:
        """Catalog name of the GPU the times are for (None when the trace's device is not in the catalog)."""
        if self.prediction is not None:
            return self.prediction.target.name
        from habitat_trace.scale.specs import load_catalog

        catalog = load_catalog(None)
        spec = pipeline.catalog_gpu(catalog, self.tables.device_name) or catalog.for_properties(
            self.tables.device_properties)
        return spec.name if spec else None

    @property
    def kernels(self) -> pd.DataFrame:
        """GPU events (kernels, copies, sets), one row each, in trace order.

        Columns: name, class, cat, device, stream, start_ns, dur_ns, grid_*/block_*, registers_per_thread,
        shared_mem_bytes, op (the launching op), op_chain (outermost first, " > "), step (ProfilerStep
        number, -1 outside steps); a scaled trace adds method, reason, origin_start_ns, origin_dur_ns.

        >>> k = load("tests/data/mlp_b32_fp32.pt.trace.json.gz").kernels
        >>> k.loc[0, "class"], k.loc[0, "op"], int(k.loc[0, "step"])
        ('gemm', 'aten::addmm', 3)
        >>> k.loc[0, "op_chain"]
        'ProfilerStep#3 > aten::linear > aten::addmm'
        """
        g = self.tables.gpu
        out = pd.DataFrame({api: g[col].to_numpy() for api, col in KERNEL_COLUMNS.items()})
        out["op_chain"] = op_chains(self.tables.ops, g[S.OP].to_numpy())
        out["step"] = step_numbers(self.tables.steps, g[S.STEP].to_numpy())
        if self.prediction is not None and self.scaled_from is not None:
            out["method"] = self.prediction.method
            out["reason"] = self.prediction.reason
            out["origin_start_ns"] = self.scaled_from.gpu[S.TS].to_numpy()
            out["origin_dur_ns"] = self.scaled_from.gpu[S.DUR].to_numpy()
        return out

    @property
    def ops(self) -> pd.DataFrame:
        """CPU ops and user annotations: name, cat, pid, tid, start_ns, dur_ns, depth, parent (row, -1 for
        none), input_dims, input_types, step (ProfilerStep number, -1 outside steps).

        >>> ops = load("tests/data/mlp_b32_fp32.pt.trace.json.gz").ops
        >>> int((ops["name"] == "aten::addmm").sum())  # 8 layers, 2 steps
        16
        """
        o = self.tables.ops
        out = pd.DataFrame({api: o[col].to_numpy() for api, col in OP_COLUMNS.items()})
        out["step"] = step_numbers(self.tables.steps, o[S.STEP].to_numpy())
        return out

    def summary(self, top: int = 10) -> dict[str, Any]:
        """What ``habitat-trace inspect --format json`` prints; a scaled trace adds ``scaled`` (origin, target,
        methods per kernel, the prediction's warnings).

        >>> s = load("tests/data/mlp_b32_fp32.pt.trace.json.gz").summary()
        >>> s["origin"]["name"], s["steps"]["count"], s["kernels"]["count"]
        ('NVIDIA H100 80GB HBM3', 2, 134)
        """
        from habitat_trace.analysis.report import summarize

        out = summarize(self.tables, top)
        if self.prediction is not None:
            p = self.prediction
            out["scaled"] = {"origin": p.origin.name, "target": p.target.name, "methods": p.method_counts(),
                             "warnings": list(p.warnings)}
        return out

    def scale(self, to: str = "A100", specs: str | Path | None = None, origin: Optional[str] = None,
              cpu_speed: float = 1.0, keep_profiler_overhead: bool = False) -> "Trace":
        """The trace as it would run on GPU ``to`` (catalog name or alias; ``specs``: an extra catalog TOML;
        ``origin``: the recording GPU when deviceProperties do not name a catalog GPU; ``cpu_speed`` and
        ``keep_profiler_overhead``: the target's host, as the CLI's --cpu-speed and --keep-profiler-overhead).

        >>> t = load("tests/data/mlp_b32_fp32.pt.trace.json.gz")
        >>> l4 = t.scale(to="L4")
        >>> l4.summary()["steps"]["mean"]["gpu_busy_ms"] > t.summary()["steps"]["mean"]["gpu_busy_ms"]
        True
        """
        from habitat_trace.scale.specs import load_catalog

        catalog = load_catalog(Path(specs) if specs else None)
        target = catalog.resolve(to)
        src = self._origin(catalog, origin)
        scaled = pipeline.scale(self.tables, src, target, pipeline.Host(cpu_speed, keep_profiler_overhead))
        info = {"input": self.path.name, "specs_file": Path(specs).name if specs else None, **scaled.record()}
        return Trace(target_tables(scaled, info), scaled.prediction, scaled.timeline, self.tables, info)

    def write(self, path: str | Path) -> Path:
        """Write the trace (gzip when ``path`` ends with .gz): a loaded trace as read (same bytes when the
        compression matches), a scaled one as ``habitat-trace scale`` writes it. Returns the path.

        >>> import tempfile, os
        >>> out = os.path.join(tempfile.mkdtemp(), "mlp.a100.pt.trace.json.gz")
        >>> load("tests/data/mlp_b32_fp32.pt.trace.json.gz").scale(to="A100").write(out).name
        'mlp.a100.pt.trace.json.gz'
        >>> load(out).kernels["class"].equals(load("tests/data/mlp_b32_fp32.pt.trace.json.gz").kernels["class"])
        True
        """
        from habitat_trace.emit.writer import write_trace

        out = Path(path)
        if self.prediction is None or self.timeline is None or self.scaled_from is None:
            return copy_trace(self.path, out)
        return write_trace(self.scaled_from, self.timeline, self.prediction, out, self.spec_info)

    def _origin(self, catalog: Catalog, origin: Optional[str]) -> Any:
        if origin is None and self.prediction is not None:
            return self.prediction.target  # scaling a scaled trace again: it runs on the last target
        return pipeline.resolve_origin(self.tables, catalog, origin)


def target_tables(scaled: pipeline.Scaled, spec_info: dict[str, Any]) -> Tables:
    """The scaled trace's tables, built from the origin's and the replayed timeline (no JSON rendered): every
    table keeps its rows and links (the replay maps CPU times monotonically, so nesting and step membership
    hold), with the target's times; deviceProperties and the ``habitat_trace`` record as ``write`` writes them.
    The raw events stay the origin's: ``raw_ts_ns``/``raw_dur_ns`` say which times they hold."""
    from habitat_trace.emit.writer import habitat_block, target_devices, target_occupancy_args

    t, tl = scaled.tables, scaled.timeline
    calls = _retimed(t.calls, tl)
    gpu = _retimed(t.gpu, tl)
    if not (np.asarray(scaled.prediction.method) == "identity").all():  # Kineto's launch statistics, on the target
        bpsm, wpsm, occ, had = target_occupancy_args(t.gpu, scaled.target)
        for col, v in ((S.CUPTI_BLOCKS_PER_SM, bpsm), (S.CUPTI_WARPS_PER_SM, wpsm), (S.CUPTI_OCCUPANCY, occ)):
            gpu[col] = np.where(had, v, gpu[col].to_numpy())
    launch = gpu[S.LAUNCH].to_numpy()
    has = launch != S.NONE
    if len(calls):
        safe = np.maximum(launch, 0)
        gpu[S.LAUNCH_TS] = np.where(has, calls[S.TS].to_numpy()[safe], S.NONE)
        gpu[S.LAUNCH_DUR] = np.where(has, calls[S.DUR].to_numpy()[safe], S.NONE)
    devices = target_devices(t, scaled.target)
    meta = dict(t.meta)
    meta["deviceProperties"] = devices
    meta["habitat_trace"] = habitat_block(scaled.prediction, spec_info)
    raw_ts, raw_dur = t.raw_times()
    return Tables(path=t.path, meta=meta, devices=devices, events=t.events, event_ts_ns=tl.ts_ns,
                  event_dur_ns=tl.dur_ns, gpu=gpu, ops=_retimed(t.ops, tl), calls=calls, steps=_retimed(t.steps, tl),
                  syncs=_retimed(t.syncs, tl), gpu_annotations=_retimed(t.gpu_annotations, tl),
                  flows=_retimed(t.flows, tl), memory=_retimed(t.memory, tl), collectives=t.collectives,
                  raw_ts_ns=raw_ts, raw_dur_ns=raw_dur)


def _retimed(df: pd.DataFrame, tl: Timeline) -> pd.DataFrame:
    """``df`` (rows of events, column ``event``) with the timeline's ts, dur and end."""
    if S.EVENT not in df.columns or not len(df):
        return df.copy()
    ev = df[S.EVENT].to_numpy()
    cols = {S.TS: tl.ts_ns[ev]}
    if S.DUR in df.columns:
        cols[S.DUR] = tl.dur_ns[ev]
    if S.END in df.columns:
        cols[S.END] = tl.ts_ns[ev] + tl.dur_ns[ev]
    return df.assign(**cols)


def copy_trace(src: Path, out: Path) -> Path:
    """Write the file ``src`` to ``out`` unchanged, (de)compressing only when the suffixes differ."""
    from habitat_trace.emit.writer import check_output, write_bytes

    check_output(out, (src,))
    raw = Path(src).read_bytes()
    gzipped = raw[:2] == reader.GZIP_MAGIC
    if gzipped and not out.name.endswith(".gz"):
        raw, gzipped = gzip.decompress(raw), False
    return write_bytes(raw, out, gzipped=gzipped)


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


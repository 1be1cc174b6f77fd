"""The target trace's content, built from one rank's replay: ``target_document(rank_replay) -> TargetDocument`` for
emit to serialize (the input's events, which of them change and how, the top-level keys with the target's
deviceProperties and the ``habitat_trace`` header), and ``target_tables`` for the Python API (the same trace as
tables, no JSON rendered). Emit only writes what this decides.

Kineto's per-kernel "blocks per SM", "warps per SM" and "est. achieved occupancy %" describe the origin GPU; where
a kernel has them they are recomputed for the target (``target_occupancy_args``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import orjson
import pandas as pd

import habitat_trace
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.trace import Tables
from habitat_trace.pipeline.host import host_record
from habitat_trace.pipeline.run import RankReplay
from habitat_trace.scale import facts
from habitat_trace.scale.dp_host import host_slowdown
from habitat_trace.scale.gpu import GpuSpec, spec_fields
from habitat_trace.scale.prediction import IDENTITY, Prediction
from habitat_trace.timeline.replay import Timeline

OCCUPANCY_KEYS = ("blocks per SM", "warps per SM", "est. achieved occupancy %")
TRACE_SUFFIX = re.compile(r"(\.pt)?\.trace\.json(\.gz)?$|\.json(\.gz)?$")
SHARED_MEM_STATIC_BYTES = 49152  # 48 KiB static shared memory per block on every CUDA GPU


@dataclass(frozen=True)
class Rewrite:
    """What changes in the events: new times (by event index) and the GPU events' args."""

    ts: np.ndarray
    dur: np.ndarray
    rows: np.ndarray  # sorted indices of the events written with new times
    gpu_ev: np.ndarray  # sorted event index of each trace.gpu row
    old_dur: np.ndarray  # per GPU row, ns
    method: np.ndarray
    reason: np.ndarray
    occupancy: tuple[np.ndarray, ...] | None  # target_occupancy_args; None when the target is the origin

    @classmethod
    def of(cls, tables: Tables, timeline: Timeline, prediction: Prediction) -> "Rewrite":
        ts = timeline.ts_ns
        gpu_ev = tables.gpu[S.EVENT].to_numpy()
        rewrite = np.zeros(len(ts), dtype=bool)  # a mask, not np.union1d: 1.7 s on 1.1M events (numpy 2.4)
        # against the times written in the raw events: those of a scaled trace's tables (API) are not
        raw_ts, raw_dur = tables.raw_times()
        rewrite[(ts != raw_ts) | (timeline.dur_ns != raw_dur)] = True
        rewrite[gpu_ev] = True
        rows = np.flatnonzero(rewrite & (ts != NO_TIME))
        same = bool((np.asarray(prediction.method) == IDENTITY).all())
        occ = None if same else target_occupancy_args(tables.gpu, prediction.target)
        return cls(ts, timeline.dur_ns, rows, gpu_ev, tables.gpu[S.DUR].to_numpy(),
                   np.asarray(prediction.method), np.asarray(prediction.reason), occ)


@dataclass(frozen=True)
class TargetDocument:
    """The target trace, ready to serialize: ``meta`` is the top-level object in its key order, with
    ``traceEvents`` standing for the events, which are the input's with ``rewrite`` applied."""

    source: Path  # the input trace (named in messages; never overwritten)
    meta: dict[str, Any]
    events: Sequence[Any]
    rewrite: Rewrite


def slug(name: str) -> str:
    """File-name form of a GPU name: "H100 SXM5 80GB" -> "h100-sxm5-80gb"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def stem(path: Path) -> str:
    return TRACE_SUFFIX.sub("", path.name) or path.name


def output_name(trace: Path, target: GpuSpec) -> str:
    """The name of ``trace`` on ``target`` in a directory of outputs: ``<stem>.<gpu-slug>.pt.trace.json.gz``
    (TensorBoard lists each as a worker)."""
    return f"{stem(trace)}.{slug(target.name)}.pt.trace.json.gz"


def header_info(rr: RankReplay, extra: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """What the ``habitat_trace`` header says beyond the prediction: the input by file name only (an absolute path
    leaks the user's directories when the output is shared), the --specs file's name, the host, ``extra``, and for
    ``--world-size N`` the scale-out (``scale_out_record``), and the step it predicts (``iteration_record``)."""
    out = {"input": rr.tables.path.name, "specs_file": rr.rank.options.specs_file, **dict(extra or {}),
           **host_record(rr.host), "iteration": iteration_record(rr)}
    if rr.scaled_out is not None:
        out["scale_out"] = scale_out_record(rr)
    return out


def iteration_record(rr: RankReplay) -> dict[str, Any]:
    """The headline the output's step stands for (compare's row of this target): the iteration, its range and what
    the range rests on (pipeline.run.Headline)."""
    h = rr.headline
    return {"iteration_ms": h.iteration_ms, "iteration_low_ms": h.iteration_low_ms,
            "iteration_high_ms": h.iteration_high_ms, "range_source": h.range_source, "source": h.source,
            "gpu_busy_ms": h.gpu_busy_ms}


def scale_out_record(rr: RankReplay) -> dict[str, Any]:
    """The scale-out a synthesized rank was built with: ranks, strategy, DDP's bucket caps or FSDP's wrap, the
    topology priced."""
    plan = rr.scaled_out.synthesized.plan if rr.scaled_out is not None else None
    if plan is None:
        return {}
    so, topo = plan.scaleout, plan.topology
    out: dict[str, Any] = {"world_size": so.world_size, "strategy": so.strategy}
    if so.strategy == "ddp":
        out.update(bucket_mb=so.bucket_mb, first_bucket_mb=so.first_bucket_mb, broadcast_buffers=so.broadcast_buffers)
    else:
        out["fsdp_wrap"] = so.fsdp_wrap
    if topo is not None:
        out.update(nodes=topo.nodes, link=topo.link, intra_gbs=topo.intra_gbs)
    out["no_straggler"] = True  # every rank runs this step: no rank's GPU waits for another's
    # every strategy: the host runs at the slowest of N hosts' pace (scale/dp_host.host_slowdown); host.cpu_speed
    # stays the host the user gave
    out["host_slowdown"] = host_slowdown(so.world_size)
    return out


def header(rr: RankReplay, extra: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The ``habitat_trace`` header: the prediction (habitat_block), header_info, and the input's own violations."""
    return {**habitat_block(rr.prediction, header_info(rr, extra)), "input_violations": rr.rank.input_violations}


def target_document(rr: RankReplay, extra: Optional[Mapping[str, Any]] = None) -> TargetDocument:
    """Rank ``rr`` on its target as a trace: every input event kept, GPU events and everything that moved retimed,
    the input's own Perfetto-rule violations in the header (``check`` tells them from ours without the input)."""
    t = rr.tables
    doc: dict[str, Any] = dict(t.meta)
    doc["deviceProperties"] = target_devices(t, rr.target)
    doc["traceEvents"] = None  # emit writes the events here
    doc["habitat_trace"] = header(rr, extra)
    return TargetDocument(t.path, doc, t.events, Rewrite.of(t, rr.timeline, rr.prediction))


def device_properties(spec: GpuSpec, base: Mapping[str, Any]) -> dict[str, Any]:
    """A deviceProperties entry describing ``spec`` (fields Kineto writes, from the catalog)."""
    occ = spec.occupancy
    major, minor = spec.compute_version
    out = dict(base)
    out.update({
        "name": spec.name, "totalGlobalMem": int(round(spec.memory_gib * 2**30)),
        "computeMajor": major, "computeMinor": minor,
        "maxThreadsPerBlock": occ.max_threads_per_block, "maxThreadsPerMultiprocessor": occ.max_threads_per_sm,
        "regsPerBlock": occ.max_registers_per_block, "warpSize": occ.warp_size, "numSms": spec.sms,
        "regsPerMultiprocessor": occ.registers_per_sm, "sharedMemPerBlockOptin": occ.shared_mem_per_block_optin_bytes,
        "sharedMemPerMultiprocessor": occ.shared_mem_per_sm_bytes,
    })
    out.setdefault("sharedMemPerBlock", SHARED_MEM_STATIC_BYTES)
    return out


def spec_dict(spec: GpuSpec) -> dict[str, Any]:
    return orjson.loads(orjson.dumps(spec_fields(spec), default=dict))


def target_occupancy_args(gpu: pd.DataFrame, target: GpuSpec) -> tuple[np.ndarray, ...]:
    """Kineto's three launch statistics for each GPU row, as they would read on ``target``: (blocks per SM,
    warps per SM, est. achieved occupancy %, mask of the rows that had them in the input).

    Kineto (libkineto CuptiActivity / output_json, kernelOccupancy in CudaDeviceProperties.cpp): blocks per
    SM = grid blocks / SMs; warps per SM = blocks per SM x threads per block / warp size; occupancy % =
    min(blocks per SM, resident blocks per SM from cuda_occupancy.h) x threads per block / max threads per SM
    x 100, written rounded to an integer (halves up). Resident blocks come from scale.occupancy with the block's shared
    memory capped at the target's opt-in limit, as the engine does (a kernel is rebuilt with tiles that fit).
    Kineto's other values have 6 decimals."""
    # the columns' arrays multiplied: 0.07 ms against 0.26 for the Series' products, once a target of scale --to all
    blocks = (gpu[S.GRID_X].to_numpy() * gpu[S.GRID_Y].to_numpy() * gpu[S.GRID_Z].to_numpy()).astype(np.float64)
    threads = gpu[S.BLOCK_X].to_numpy() * gpu[S.BLOCK_Y].to_numpy() * gpu[S.BLOCK_Z].to_numpy()
    had = gpu[S.CUPTI_BLOCKS_PER_SM].notna().to_numpy() & (blocks > 0) & (threads > 0)
    thr = np.where(had, threads, 1)
    lim = target.occupancy
    smem = np.minimum(gpu[S.SHARED_MEM].to_numpy(), lim.shared_mem_per_block_optin_bytes)
    # ROCm records no registers (-1): no register limit; an AMD target takes CDNA's rules (facts.blocks_per_sm_on)
    resident = facts.blocks_per_sm_on(thr, np.maximum(gpu[S.REGISTERS].to_numpy(), 0), smem, target)
    bpsm = blocks / target.sms
    wpsm = bpsm * thr / lim.warp_size
    # halves round up, as Kineto's do (12.5% is written 13; np.rint would give 12)
    occ = np.floor(100 * np.minimum(bpsm, resident) * thr / lim.max_threads_per_sm + 0.5)
    return np.round(bpsm, 6), np.round(wpsm, 6), occ.astype(np.int64), had


def method_counts(prediction: Prediction) -> dict[str, int]:
    counts = pd.Series(prediction.method, dtype=object).value_counts(sort=False)  # np.unique on objects is slow
    return {str(k): int(v) for k, v in sorted(counts.items())}


def target_devices(tables: Tables, target: GpuSpec) -> list[dict[str, Any]]:
    """The output's deviceProperties: each of the trace's devices described as ``target``."""
    devices = tables.devices or [{"id": int(tables.gpu[S.DEVICE].mode().iloc[0]) if len(tables.gpu) else 0}]
    return [device_properties(target, d) for d in devices]


def habitat_block(prediction: Prediction, info: Mapping[str, Any]) -> dict[str, Any]:
    """The output's top-level ``habitat_trace`` record: what was predicted, from what, and how."""
    return {
        "version": habitat_trace.__version__,
        "origin": prediction.origin.name, "target": prediction.target.name,
        "spec": spec_dict(prediction.target), "methods": method_counts(prediction),
        "warnings": list(prediction.warnings), **dict(info),
    }


def target_tables(rr: RankReplay) -> Tables:
    """The target trace's tables, built from the origin's and the replayed timeline (no JSON rendered): every
    table keeps its rows and links (the replay maps CPU times monotonically, so nesting and step membership
    hold), with the target's times; deviceProperties and the ``habitat_trace`` record as ``target_document``
    writes them. The raw events stay the origin's: ``raw_ts_ns``/``raw_dur_ns`` say which times they hold."""
    t, tl = rr.tables, rr.timeline
    calls = _retimed(t.calls, tl)
    gpu = _retimed(t.gpu, tl)
    if not (np.asarray(rr.prediction.method) == IDENTITY).all():  # Kineto's launch statistics, on the target
        bpsm, wpsm, occ, had = target_occupancy_args(t.gpu, rr.target)
        for col, v in ((S.CUPTI_BLOCKS_PER_SM, bpsm), (S.CUPTI_WARPS_PER_SM, wpsm), (S.CUPTI_OCCUPANCY, occ)):
            gpu[col] = np.where(had, v, gpu[col].to_numpy())
    launch = gpu[S.LAUNCH].to_numpy()
    has = launch != S.NONE
    if len(calls):
        safe = np.maximum(launch, 0)
        gpu[S.LAUNCH_TS] = np.where(has, calls[S.TS].to_numpy()[safe], S.NONE)
        gpu[S.LAUNCH_DUR] = np.where(has, calls[S.DUR].to_numpy()[safe], S.NONE)
    devices = target_devices(t, rr.target)
    meta = dict(t.meta)
    meta["deviceProperties"] = devices
    meta["habitat_trace"] = header(rr)
    raw_ts, raw_dur = t.raw_times()
    return Tables(path=t.path, meta=meta, devices=devices, events=t.events, event_ts_ns=tl.ts_ns,
                  event_dur_ns=tl.dur_ns, gpu=gpu, ops=_retimed(t.ops, tl), calls=calls, steps=_retimed(t.steps, tl),
                  syncs=_retimed(t.syncs, tl), gpu_annotations=_retimed(t.gpu_annotations, tl),
                  flows=_retimed(t.flows, tl), memory=_retimed(t.memory, tl), collectives=t.collectives,
                  raw_ts_ns=raw_ts, raw_dur_ns=raw_dur, vendor=t.vendor, violations=t.violations)


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

"""Lay a data-parallel plan (scale/dataparallel.py) into a one-GPU trace as Kineto events, so that the ordinary
ingest, replay and writer see communication streams with the dependencies the real run has.

Contract: ``add_events(tables, plan) -> (tables, rows)``: new tables (the input's events, then the synthesized
ones) and the synthesized kernels' rows in the new ``gpu`` table, in ``plan.kernels`` order. Each planned kernel
becomes a launch call on a synthesized CPU thread and a GPU event on its stream; a dependency becomes a
cudaEventRecord / cudaStreamWaitEvent pair with the ``cuda_sync`` record CUPTI writes for it, which timeline/links.py
resolves by stream: a kernel waits for the compute-stream work launched before its ``after_ns``; at a plan's wait
the first compute kernel launched afterwards waits for what the communication stream had launched.

Origin times: everything synthesized takes no time on the one GPU (dur 0; the written trace's
``habitat_origin_dur_us`` says 0), a kernel starting when the work it depends on had ended, so every added
dependency is one the origin honoured (schedule.py keeps only those) and the replay alone gives it its length.
Cost: the input's events are parsed into a list and ingested again with the added ones (a trace loaded lazily from
its bytes is held as parsed objects, ~9x its JSON size, while that runs).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import from_document
from habitat_trace.scale import collective as C
from habitat_trace.scale.dataparallel import ROLES, Plan

THREAD_NAME = "habitat-trace: data-parallel launches (synthesized)"
STREAM_NAMES = {"comm": "DDP all-reduce", "unshard": "FSDP all-gather", "reduce": "FSDP reduce-scatter"}
PROCESS_GROUP = "habitat-trace scale-out"


def compute_stream(gpu: pd.DataFrame) -> tuple[int, int]:
    """(device, stream) that ran the most GPU time: the stream the backward's gradients are produced on."""
    busy = gpu.groupby([S.DEVICE, S.STREAM])[S.DUR].sum()
    device, stream = busy.idxmax()
    return int(device), int(stream)


def _us(ns: int) -> float:
    return ns / 1000.0  # exact to the ns on re-reading: ingest rounds µs x 1000 to the nearest integer


class _Builder:
    """The synthesized events, with fresh correlation ids, streams and one CPU thread."""

    def __init__(self, tables: Any, plan: Plan) -> None:
        gpu, calls = tables.gpu, tables.calls
        self.device, self.compute = compute_stream(gpu)
        raw = tables.events
        kernel = raw[int(gpu[S.EVENT].iat[int(np.argmax(gpu[S.STREAM].to_numpy() == self.compute))])]
        self.gpu_pid = kernel.get("pid", self.device)
        call = raw[int(calls[S.EVENT].iat[0])] if len(calls) else {"pid": 0}
        self.cpu_pid = call.get("pid", 0)
        tids = [int(t) for t in pd.unique(calls[S.TID]) if str(t).lstrip("-").isdigit()] if len(calls) else [0]
        self.cpu_tid = max(tids + [0]) + 1
        top = int(gpu[S.STREAM].max()) if len(gpu) else 0
        self.stream = {"compute": self.compute, **{r: top + 1 + i for i, r in enumerate(ROLES[1:])}}
        corr = np.concatenate([gpu[S.CORRELATION].to_numpy(), calls[S.CORRELATION].to_numpy(), [0]])
        self.next_corr = int(corr.max()) + 1
        self.plan = plan
        self.events: list[dict[str, Any]] = []

    def corr(self) -> int:
        self.next_corr += 1
        return self.next_corr

    def call(self, name: str, ts: int, corr: int) -> None:
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": self.cpu_pid, "tid": self.cpu_tid,
                            "ts": _us(ts), "dur": 0.0, "args": {"correlation": corr, "External id": corr}})

    def wait(self, record_ts: int, wait_ts: int, on: str, waiting: str) -> None:
        """A cudaEventRecord on ``on`` at record_ts, and ``waiting``'s stream waiting for it at wait_ts."""
        rec, w = self.corr(), self.corr()
        self.call("cudaEventRecord", record_ts, rec)
        self.call("cudaStreamWaitEvent", wait_ts, w)
        self.events.append({"ph": "X", "cat": "cuda_sync", "name": "Wait Event", "pid": self.gpu_pid,
                            "tid": self.stream[waiting], "ts": _us(wait_ts), "dur": 0.0, "args": {
                                "cuda_sync_kind": "Wait Event", "wait_on_stream": self.stream[on],
                                "wait_on_cuda_event_record_corr_id": rec, "stream": self.stream[waiting],
                                "correlation": w, "device": self.device}})

    def kernel(self, k: Any, ts: int) -> None:
        corr = self.corr()
        self.call("cudaMemcpyAsync" if k.cat == S.CAT_MEMCPY else "cudaLaunchKernel", int(k.launch_ns), corr)
        args: dict[str, Any] = {"device": self.device, "stream": self.stream[k.role], "correlation": corr,
                                "External id": corr, "habitat_synthesized": str(k.label)}
        if k.collective:
            args.update(_collective_args(k, self.plan.scaleout.world_size))
        self.events.append({"ph": "X", "cat": k.cat, "name": k.name, "pid": self.gpu_pid,
                            "tid": self.stream[k.role], "ts": _us(ts), "dur": 0.0, "args": args})

    def names(self) -> None:
        self.events.append({"name": "thread_name", "ph": "M", "pid": self.cpu_pid, "tid": self.cpu_tid,
                            "args": {"name": THREAD_NAME}})
        for role in set(self.plan.kernels["role"]) - {"compute"}:
            self.events.append({"name": "thread_name", "ph": "M", "pid": self.gpu_pid, "tid": self.stream[role],
                                "args": {"name": f"stream {self.stream[role]} ({STREAM_NAMES[role]}, synthesized)"}})


def _collective_args(k: Any, world: int) -> dict[str, Any]:
    """The fields PyTorch's record_param_comms writes (schema.COLLECTIVE_ARGS), so collective_fields reads them."""
    width = C.DTYPE_BYTES.get(str(k.dtype).lower(), 4)
    full = int(round(k.nbytes / width))
    shard = full // world
    n_in, n_out = {C.ALLGATHER: (shard, full), C.REDUCESCATTER: (full, shard)}.get(k.collective, (full, full))
    return {"Collective name": k.collective, "In msg nelems": n_in, "Out msg nelems": n_out, "dtype": k.dtype,
            "Group size": world, "Process Group Name": PROCESS_GROUP, "habitat_algorithm": k.algorithm,
            "habitat_protocol": k.protocol}


def _origin_starts(tables: Any, plan: Plan, compute: tuple[int, int]) -> np.ndarray:
    """Origin start of each planned kernel (dur 0): its launch, the end of the compute work launched before its
    ``after_ns`` (or, on the compute stream, before its launch) and the previous kernel on its stream."""
    gpu, calls = tables.gpu, tables.calls
    launch = gpu[S.LAUNCH].to_numpy()
    on = (gpu[S.DEVICE].to_numpy() == compute[0]) & (gpu[S.STREAM].to_numpy() == compute[1]) & (launch >= 0)
    lts = calls[S.TS].to_numpy()[launch[on]] if len(calls) else np.zeros(0, dtype=np.int64)
    order = np.argsort(lts, kind="stable")
    lts, reach = lts[order], np.maximum.accumulate(gpu[S.END].to_numpy()[on][order]) if on.any() else np.zeros(0)
    k = plan.kernels

    def ended_before(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(lts, t, side="left") - 1
        return np.where(i >= 0, reach[np.maximum(i, 0)] if len(reach) else 0, np.iinfo(np.int64).min)

    anchor = np.where(k["role"].to_numpy() == "compute", k["launch_ns"].to_numpy(), k["after_ns"].to_numpy())
    start = np.maximum(k["launch_ns"].to_numpy() + 1, np.where(anchor >= 0, ended_before(anchor), 0))
    out = start.astype(np.int64)
    for role in ROLES:  # each stream runs its kernels in launch order
        rows = np.flatnonzero(k["role"].to_numpy() == role)
        rows = rows[np.argsort(k["launch_ns"].to_numpy()[rows], kind="stable")]
        out[rows] = np.maximum.accumulate(out[rows]) if len(rows) else out[rows]
    return out


def add_events(tables: Any, plan: Plan) -> tuple[Any, np.ndarray]:
    """The tables with ``plan``'s kernels, launches and dependencies added (module doc), and the added kernels'
    rows in the new gpu table (in plan.kernels order)."""
    b = _Builder(tables, plan)
    start = _origin_starts(tables, plan, (b.device, b.compute))
    first_event = len(tables.events)
    kernel_events = []
    for k, ts in zip(plan.kernels.itertuples(index=False), start.tolist()):
        if k.after_ns >= 0:
            b.wait(int(k.after_ns), int(k.launch_ns) - 1, "compute", k.role)
        kernel_events.append(first_event + len(b.events) + 1)  # after its launch call
        b.kernel(k, ts)
    for w in plan.waits.itertuples(index=False):
        b.wait(int(w.at_ns), int(w.at_ns) + 1, w.role, "compute")
    b.names()
    doc = dict(tables.meta)
    doc["traceEvents"] = list(tables.events) + b.events
    new = from_document(tables.path, doc)
    index = pd.Index(new.gpu[S.EVENT].to_numpy())
    return new, index.get_indexer(np.array(kernel_events, dtype=np.int64))

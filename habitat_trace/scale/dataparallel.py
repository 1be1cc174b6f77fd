"""What data parallelism adds to a one-GPU training step on N GPUs: DDP's bucketed all-reduces, or FSDP's per-unit
all-gathers and reduce-scatters, and the copies each adds on the compute stream, with their predicted times.

Contract: ``plan(tables, params, target, ScaleOut) -> Plan``: one row per kernel to add (``Plan.kernels``: the
stream it runs on, the CPU time it is launched at, the compute work it waits for, its predicted duration) and one
per point where the compute stream waits for a communication stream (``Plan.waits``), plus the factor on the
optimizer's kernels (FSDP steps a 1/N shard). Pure: tables, the recovered parameters (scale/params.py) and a GpuSpec
in; timeline/scaleout.py lays the kernels into the trace and replays it. The rules and their sources are in
docs/distributed.md ("Scale-out from one GPU"): DDP's bucketing is reducer.cpp's ``compute_bucket_assignment_by_size``
over the gradient-ready order (``rebuild_buckets``), FSDP's schedule torch/distributed/fsdp/_runtime_utils.py's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd

from habitat_trace.errors import HabitatTraceError, SpecError
from habitat_trace.ingest import schema as S
from habitat_trace.scale import collective as C
from habitat_trace.scale import dp_host as H
from habitat_trace.scale.crossarch import dram_efficiency
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.params import COMM_DTYPE, Params, buffers, feature_joins
from habitat_trace.scale.units import fsdp_units

# FSDP is FSDP2 (torch.distributed.fsdp.fully_shard, PyTorch's FSDP since 2.4); FSDP1 the FullyShardedDataParallel
# wrapper. Both shard alike on the GPU; FSDP2's per-module Python hooks cost the host more (scale/dp_host.py).
DDP, FSDP, FSDP1 = "ddp", "fsdp", "fsdp1"
STRATEGIES = (DDP, FSDP, FSDP1)
# DistributedDataParallel(bucket_cap_mb=25): bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
# (torch/nn/parallel/distributed.py); the first bucket's cap is reducer.hpp's kDefaultFirstBucketBytes = 1 MiB
# (dist._DEFAULT_FIRST_BUCKET_BYTES), used by Reducer::rebuild_buckets after the first iteration.
DEFAULT_BUCKET_MB, FIRST_BUCKET_MB = 25.0, 1.0
MIB = 1024 * 1024
WRAPS = ("blocks", "none")  # FSDP units: repeated blocks + the root (scale/units.py), or one unit (no auto-wrap)
# Contention: NCCL runs one CTA per channel, each on an SM of its own, for as long as its kernel runs (spinning
# while it waits for the peers, moving data once they are there: NVIDIA/nccl src/device/common.h, one block per
# channel). A compute kernel overlapping a collective runs on the other SMs, as on a green context of SMs - channels
# (timeline/scaleout.py ``contend``, with the within-chip law validated for fewer SMs: docs/accuracy.md). None:
# the channels NCCL uses on the topology's link (collective.nccl_channels); 0: no contention (a what-if).
# The shortest elementwise kernel: the DDP mul_out/copy kernels of the public A100 DDP trace (HTA's a100_nccl)
# take 1.4-1.6 µs at p0-p10 for 1000-element tensors; launch and drain do not shrink with the bytes.
KERNEL_FLOOR_NS = 1500
# Elementwise passes DDP and FSDP add, in bytes moved per parameter byte: a read and a write per pass.
# DDP: mul_out(bucket_view, grad, 1/N) into the bucket, then copy_bucket_to_grad back (reducer.cpp, one each).
# FSDP: the backward of the flat parameter's split (a cat of the unit's gradients) and the pre-divide (div_).
DDP_PASS_BYTES = 2
FSDP_PASS_BYTES = 4
DTYPE_ALIASES = {"fp32": "float", "float32": "float", "bf16": "c10::BFloat16", "bfloat16": "c10::BFloat16",
                 "fp16": "c10::Half", "float16": "c10::Half", "half": "c10::Half"}
ROLES = ("compute", "comm", "unshard", "reduce")
HOST_COLUMNS = ("step", "at_ns", "host_u", "label")  # streams: DDP's one NCCL stream; FSDP's all-gather, reduce


@dataclass(frozen=True)
class ScaleOut:
    """A data-parallel deployment of a one-GPU step: ``world_size`` ranks, each running the traced step on its own
    data (the per-GPU batch is the trace's). ``None`` fields take the catalog's node (collective.topology) or
    NCCL's own choice (the model's fastest algorithm and protocol)."""

    world_size: int = 1
    strategy: str = DDP
    bucket_mb: float = DEFAULT_BUCKET_MB
    first_bucket_mb: float = FIRST_BUCKET_MB
    gpus_per_node: Optional[int] = None
    nodes: Optional[int] = None
    interconnect: Optional[str] = None
    comm_dtype: Optional[str] = None  # on the wire (FSDP MixedPrecision, a compress hook); None: the parameters'
    algorithm: Optional[str] = None  # "RING" | "TREE"
    protocol: Optional[str] = None  # "LL" | "LL128" | "SIMPLE"
    fsdp_wrap: str = "blocks"
    nccl_channels: Optional[int] = None
    broadcast_buffers: bool = True  # DDP(broadcast_buffers=...): the module's buffers from rank 0 at every forward

    def __post_init__(self) -> None:
        checks = [
            (isinstance(self.world_size, int) and self.world_size >= 1, f"world size {self.world_size!r}: give >= 1"),
            (self.strategy in STRATEGIES, f"strategy {self.strategy!r}: choose {' or '.join(STRATEGIES)}"),
            (self.bucket_mb > 0 and self.first_bucket_mb > 0, "bucket sizes must be > 0 MiB"),
            (self.gpus_per_node is None or self.gpus_per_node >= 1, "gpus per node must be >= 1"),
            (self.nodes is None or 1 <= self.nodes <= self.world_size, "nodes must be between 1 and the world size"),
            (self.interconnect in (None, *C.INTERCONNECTS), f"interconnect {self.interconnect!r}: choose "
             f"{' or '.join(C.INTERCONNECTS)}"),
            (self.comm_dtype is None or self.comm_dtype.lower() in DTYPE_ALIASES,
             f"comm dtype {self.comm_dtype!r}: choose one of {', '.join(DTYPE_ALIASES)}"),
            (self.algorithm in (None, "RING", "TREE"), f"algorithm {self.algorithm!r}: RING or TREE"),
            (self.protocol in (None, *C.PROTOCOLS), f"protocol {self.protocol!r}: one of {', '.join(C.PROTOCOLS)}"),
            (self.fsdp_wrap in WRAPS, f"fsdp wrap {self.fsdp_wrap!r}: one of {', '.join(WRAPS)}"),
            (self.nccl_channels is None or (isinstance(self.nccl_channels, int) and self.nccl_channels >= 0),
             f"NCCL channels {self.nccl_channels!r}: give a count >= 0"),
        ]
        bad = [why for ok, why in checks if not ok]
        if bad:
            raise HabitatTraceError("scale-out: " + "; ".join(bad))


@dataclass(frozen=True)
class Plan:
    """``kernels``: step, role, name, cat, launch_ns, after_ns (-1: none), dur_ns, collective, nbytes, dtype,
    algorithm, protocol, label. ``waits``: step, at_ns, role (the compute stream waits there for what ``role``
    launched before). ``host``: step, at_ns, host_u, label (CPU work from origin time at_ns on, in units of the
    trace's trivial-op time u). ``optimizer_factor``: on the optimizer kernels' durations."""

    scaleout: ScaleOut
    target: GpuSpec
    topology: Optional[C.Topology]
    kernels: pd.DataFrame
    waits: pd.DataFrame
    optimizer_factor: float = 1.0
    warnings: tuple[str, ...] = ()
    host: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(HOST_COLUMNS)))


def deployed(target: GpuSpec, so: ScaleOut) -> tuple[GpuSpec, C.Topology]:
    """``target`` with the plan's what-ifs and the topology its ranks talk over (SpecError where the catalog lacks it)."""
    spec = C.with_deployment(target, so.interconnect, so.gpus_per_node, so.nodes)
    topo, why = C.topology(spec, so.world_size)
    if topo is None:
        raise SpecError(f"{target.name}: cannot price {so.world_size} ranks' collectives: {why}; give the "
                        "interconnect (--interconnect nvlink|pcie) or a GPU whose catalog entry has it")
    return spec, topo


def price(coll: str, nbytes: float, topo: C.Topology, so: ScaleOut) -> tuple[int, str, str]:
    """(ns, algorithm, protocol): NCCL's model (collective.model_us) at the fastest algorithm/protocol, as NCCL's
    tuner picks the minimum predicted time (tuning.cc); Tree only for all-reduce; the plan's choice when given."""
    algos = [so.algorithm] if so.algorithm else (["RING", "TREE"] if coll == C.ALLREDUCE else ["RING"])
    protos = [so.protocol] if so.protocol else list(C.PROTOCOLS)
    us, algo, proto = min((C.model_us(coll, a, p, nbytes, topo), a, p) for a in algos for p in protos)
    return max(int(round(us * 1e3)), 1), algo, proto


def copy_ns(moved: np.ndarray, target: GpuSpec) -> np.ndarray:
    """Elementwise passes: bytes moved at the achievable DRAM bandwidth (crossarch.dram_efficiency), never below
    KERNEL_FLOOR_NS."""
    bw = dram_efficiency(target) * target.memory_bandwidth_gbs  # GB/s = B/ns
    return np.maximum(np.rint(np.asarray(moved, dtype=np.float64) / bw), KERNEL_FLOOR_NS).astype(np.int64)


def ddp_buckets(nbytes: np.ndarray, dtypes: np.ndarray, limits: tuple[int, int]) -> list[list[int]]:
    """DDP's buckets over tensors in gradient-ready order (reducer.cpp compute_bucket_assignment_by_size, as
    rebuild_buckets calls it): one open bucket per dtype; a tensor joins its dtype's bucket, which closes once its
    size reaches that dtype's current limit (first the first-bucket cap, then the bucket cap); open buckets are
    appended at the end. Returns tensor positions per bucket, in the order DDP reduces them."""
    result: list[list[int]] = []
    open_: dict[str, list[int]] = {}
    size: dict[str, int] = {}
    limit_at: dict[str, int] = {}
    for i, (b, d) in enumerate(zip(np.asarray(nbytes).tolist(), np.asarray(dtypes).tolist())):
        open_.setdefault(d, []).append(i)
        size[d] = size.get(d, 0) + int(b)
        k = limit_at.setdefault(d, 0)
        if size[d] >= limits[k]:
            result.append(open_.pop(d))
            size[d] = 0
            limit_at[d] = min(k + 1, len(limits) - 1)
    result.extend(b for b in open_.values() if b)
    return result


def _comm_bytes(nbytes: np.ndarray, dtypes: np.ndarray, so: ScaleOut) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and dtype on the wire: the parameters' own, or ``comm_dtype``'s width."""
    from habitat_trace.scale.cost import DTYPE_BYTES

    if so.comm_dtype is None:
        return nbytes.astype(np.float64), dtypes
    d = DTYPE_ALIASES[so.comm_dtype.lower()]
    width = np.array([DTYPE_BYTES[x] for x in dtypes], dtype=np.float64)
    return nbytes / width * DTYPE_BYTES[d], np.full(len(dtypes), d, dtype=object)


class _Rows:
    """Accumulates the plan's kernels and waits."""

    def __init__(self, so: ScaleOut, topo: C.Topology, target: GpuSpec) -> None:
        self.so, self.topo, self.target = so, topo, target
        self.kernels: list[dict[str, Any]] = []
        self.waits: list[dict[str, Any]] = []
        self.host: list[dict[str, Any]] = []

    def collective(self, step: int, role: str, coll: str, nbytes: float, dtype: str, launch: int, after: int,
                   label: str) -> None:
        dur, algo, proto = price(coll, nbytes, self.topo, self.so)
        name = f"ncclDevKernel_{_KERNEL_NAMES[coll]}_{algo}_{proto}(synthesized by habitat-trace)"
        self.kernels.append(dict(step=step, role=role, name=name, cat="kernel", launch_ns=int(launch),
                                 after_ns=int(after), dur_ns=dur, collective=coll, nbytes=float(nbytes),
                                 dtype=COMM_DTYPE.get(dtype, "Float"), algorithm=algo, protocol=proto, label=label))

    def copy(self, step: int, name: str, cat: str, moved: float, launch: int, label: str) -> None:
        dur = int(copy_ns(np.array([moved]), self.target)[0])
        self.kernels.append(dict(step=step, role="compute", name=name, cat=cat, launch_ns=int(launch), after_ns=-1,
                                 dur_ns=dur, collective="", nbytes=float(moved), dtype="", algorithm="", protocol="",
                                 label=label))

    def wait(self, step: int, at: int, role: str) -> None:
        self.waits.append(dict(step=step, at_ns=int(at), role=role))

    def hook(self, step: int, at: int, u: float, label: str) -> None:
        """Host work of ``u`` trivial-op units from origin time ``at`` on (FSDP2's hooks)."""
        if u > 0:
            self.host.append(dict(step=step, at_ns=int(at), host_u=float(u), label=label))

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        k = pd.DataFrame(self.kernels, columns=["step", "role", "name", "cat", "launch_ns", "after_ns", "dur_ns",
                                                "collective", "nbytes", "dtype", "algorithm", "protocol", "label"])
        w = pd.DataFrame(self.waits, columns=["step", "at_ns", "role"])
        h = pd.DataFrame(self.host, columns=list(HOST_COLUMNS))
        return k, w, h


_KERNEL_NAMES = {C.ALLREDUCE: "AllReduce_Sum", C.ALLGATHER: "AllGather", C.REDUCESCATTER: "ReduceScatter_Sum",
                 C.BROADCAST: "Broadcast"}
DDP_COPY_IN = "vectorized_elementwise_kernel (DDP reducer mul_out into the bucket, synthesized by habitat-trace)"
DDP_COPY_OUT = "Memcpy DtoD (Device -> Device) (DDP copy_bucket_to_grad, synthesized by habitat-trace)"
DDP_BUFFER_FLATTEN = "CatArrayBatchedCopy (DDP buffers flattened for their broadcast, synthesized by habitat-trace)"
DDP_BUFFER_COPY = "Memcpy DtoD (Device -> Device) (DDP broadcast buffer back, synthesized by habitat-trace)"
FSDP_FLATTEN = "CatArrayBatchedCopy + div_ (FSDP flat gradient and pre-divide, synthesized by habitat-trace)"
FSDP2_COPY_OUT = "split_with_sizes_copy (FSDP2 all-gather copy-out, synthesized by habitat-trace)"


def plan(tables: Any, params: Params, target: GpuSpec, so: ScaleOut) -> Plan:
    """The kernels and waits ``so`` adds to every step of ``tables`` (module doc); an empty plan for one rank."""
    spec, topo = deployed(target, so) if so.world_size > 1 else (target, None)
    if topo is None:
        empty = _Rows(so, C.Topology(1, 1, "nvlink", 1.0, float("nan")), spec).frames()
        return Plan(so, spec, None, empty[0], empty[1], host=empty[2])
    rows = _Rows(so, topo, spec)
    spans = backward_spans(tables)
    warnings: list[str] = list(params.warnings)
    factor = 1.0
    bufs = buffers(tables) if so.strategy == DDP and so.broadcast_buffers else None
    for step in params.steps:
        f = params.of_step(step)
        if step not in spans.index:
            continue
        start, end = (int(x) for x in spans.loc[step, ["start_ns", "end_ns"]])
        if so.strategy == DDP:
            fwd_start = int(tables.steps[S.TS].iat[step]) + 1
            _ddp_step(rows, step, f, end, fwd_start)
            if bufs is not None:
                _ddp_buffers(rows, step, bufs[bufs["step"].to_numpy() == step], fwd_start)
        else:
            warnings += _fsdp_step(rows, step, f, start, end, feature_joins(tables, step, start))
            if so.strategy == FSDP:
                _fsdp2_optimizer(rows, tables, step, len(f))
    if so.strategy != DDP:
        factor = 1.0 / so.world_size
    kernels, waits, host = rows.frames()
    return Plan(so, spec, topo, kernels, waits, factor, tuple(dict.fromkeys(warnings)), host)


def backward_spans(tables: Any) -> pd.DataFrame:
    """Per step (index): the first backward node's start and the last one's end (CPU ns)."""
    from habitat_trace.scale.params import EVALUATE

    ops = tables.ops
    is_bwd = ops[S.NAME].str.startswith(EVALUATE).to_numpy()
    g = ops[is_bwd].groupby(S.STEP)
    return pd.DataFrame({"start_ns": g[S.TS].min(), "end_ns": g[S.END].max()})


def _ddp_step(rows: _Rows, step: int, f: pd.DataFrame, bwd_end: int, fwd_start: int) -> None:
    """DDP: its forward's own host time (dp_host.DDP_FORWARD_U) at the step's start, a mul_out copy per gradient as it
    is ready, an all-reduce per bucket once all of its gradients (and every earlier bucket) are (its issue costs the
    host dp_host.DDP_BUCKET_U), the compute stream waiting for the last at the backward's end, then the copies back."""
    so = rows.so
    rows.hook(step, fwd_start, H.DDP_FORWARD_U, "DDP forward (_pre_forward, _post_forward)")
    limits = (int(so.first_bucket_mb * MIB), int(so.bucket_mb * MIB))
    ready = f["ready_ns"].to_numpy()
    nbytes, dtypes = f["nbytes"].to_numpy(), f["dtype"].to_numpy()
    for i in range(len(f)):
        rows.hook(step, int(ready[i]), H.DDP_GRAD_U, f"DDP hook of grad {i}")
        rows.copy(step, DDP_COPY_IN, "kernel", DDP_PASS_BYTES * nbytes[i], int(ready[i]) + 1, f"grad {i} into its bucket")
    wire, wire_dtype = _comm_bytes(nbytes, dtypes, so)
    buckets = ddp_buckets(nbytes, dtypes, limits)
    launched = -(1 << 62)
    for b, members in enumerate(buckets):
        launched = max(launched, int(ready[members].max()) + 3)  # DDP reduces buckets in order (next_bucket_)
        rows.hook(step, launched, H.DDP_BUCKET_U, f"DDP bucket {b + 1} issue")
        rows.collective(step, "comm", C.ALLREDUCE, float(wire[members].sum()), str(wire_dtype[members[0]]), launched,
                        launched - 1, f"DDP bucket {b + 1}/{len(buckets)}: {len(members)} gradients, "
                        f"{wire[members].sum() / MIB:.2f} MiB")
    final = max(bwd_end, launched) + 4  # finalize_backward: the current stream waits for every bucket's work
    rows.wait(step, final, "comm")
    for i in range(len(f)):
        rows.hook(step, final + 2 + i, H.DDP_COPY_OUT_U, f"DDP copy_bucket_to_grad {i}")
        rows.copy(step, DDP_COPY_OUT, "gpu_memcpy", DDP_PASS_BYTES * nbytes[i], final + 2 + i, f"bucket to grad {i}")


def _ddp_buffers(rows: _Rows, step: int, bufs: pd.DataFrame, fwd_start: int) -> None:
    """DDP's broadcast of the module's buffers as its forward opens (distributed.py _sync_buffers; c10d comm.cpp
    broadcast_coalesced): per dtype (one bucket of at most 250 MiB, broadcast_bucket_size) a flatten on the compute
    stream, a broadcast from rank 0 on the NCCL stream, the compute stream waiting for it, and a copy back into each
    buffer; its host time dp_host.ddp_buffers_u, read from the DDP rank traces."""
    if not len(bufs):
        return
    rows.hook(step, fwd_start, H.ddp_buffers_u(len(bufs)), f"DDP buffers' broadcast ({len(bufs)} buffers)")
    at = fwd_start + 1
    for dtype, g in bufs.groupby("dtype", sort=False):
        nbytes = float(g["nbytes"].sum())
        rows.copy(step, DDP_BUFFER_FLATTEN, "kernel", 2 * nbytes, at, f"{len(g)} {dtype} buffers flattened")
        rows.collective(step, "comm", C.BROADCAST, nbytes, str(dtype), at + 1, at,
                        f"DDP buffers: {len(g)} {dtype} buffers, {nbytes / MIB:.3f} MiB")
        at += 2
    rows.wait(step, at, "comm")
    for i, nbytes in enumerate(bufs["nbytes"].to_numpy()):
        rows.copy(step, DDP_BUFFER_COPY, "gpu_memcpy", 2 * float(nbytes), at + 1 + i, f"buffer {i} back")


def _fsdp_step(rows: _Rows, step: int, f: pd.DataFrame, bwd_start: int, bwd_end: int,
               joins: Optional[np.ndarray] = None) -> list[str]:
    """FSDP FULL_SHARD: per unit an all-gather before its forward and before its backward (not the root's: it stays
    unsharded after the forward), a reduce-scatter after its backward; the next unit's backward all-gather prefetched
    at the previous one's pre-backward (BACKWARD_PRE), at most two all-gathers in flight (limit_all_gathers). FSDP2
    also copies each gathered unit out into its parameters on the compute stream (split_with_sizes_copy), and its
    hooks cost the host (scale/dp_host.py) at the points they run."""
    so = rows.so
    fsdp2 = so.strategy == FSDP
    units, warnings = fsdp_unit_ranges(f, so.fsdp_wrap, joins)
    wire, wire_dtype = _comm_bytes(f["nbytes"].to_numpy(), f["dtype"].to_numpy(), so)
    ready, fwd, nbytes = f["ready_ns"].to_numpy(), f["forward_ns"].to_numpy(), f["nbytes"].to_numpy()
    in_unit = np.zeros(len(f), dtype=bool)
    for a, b in units:
        in_unit[a:b] = True
    root = np.flatnonzero(~in_unit)
    known = fwd[fwd >= 0]
    f0 = int(known.min()) if len(known) else bwd_start
    dt = str(wire_dtype[0]) if len(wire_dtype) else "float"
    label = "FSDP2" if fsdp2 else "FSDP1"

    def hook(at: int, kind: str, n: int, what: str) -> None:
        rows.hook(step, at, H.fsdp_hook_u(kind, n, fsdp2), f"{label} {kind} {what}")
    if len(root):
        hook(f0 - 14, "pre_forward", len(root), "root")
        rows.collective(step, "unshard", C.ALLGATHER, float(wire[root].sum()), dt, f0 - 12, f0 - 13,
                        f"FSDP root all-gather ({len(root)} params)")
        rows.wait(step, f0 - 11, "unshard")
        if fsdp2:
            _copy_out(rows, step, nbytes, root, f0 - 10, "root")
    forward = sorted(units, key=lambda u: -u[0])  # k runs backward: the last unit in k order runs first forward
    starts = [int(fwd[a:b][fwd[a:b] >= 0].min()) if (fwd[a:b] >= 0).any() else f0 for a, b in forward]
    for i, ((a, b), s) in enumerate(zip(forward, starts)):
        # the first all-gathers wait for the previous step's compute (the root's pre-forward makes the all-gather
        # stream wait for the current stream); later ones for the free event of unit i-2 (the rate limiter)
        after = starts[i - 1] - 5 if i >= 2 else f0 - 13
        if i:  # the previous unit's post-forward reshard runs before this unit's pre-forward
            hook(s - 6, "post_forward", forward[i - 1][1] - forward[i - 1][0], f"unit {i}")
        hook(s - 5, "pre_forward", b - a, f"unit {i + 1}")
        rows.collective(step, "unshard", C.ALLGATHER, float(wire[a:b].sum()), dt, s - 4, after,
                        f"FSDP unit {i + 1} forward all-gather ({b - a} params)")
        rows.wait(step, s - 2, "unshard")
        if fsdp2:
            _copy_out(rows, step, nbytes, np.arange(a, b), s - 1, f"unit {i + 1}")
    if forward:
        hook(bwd_start - 8, "post_forward", forward[-1][1] - forward[-1][0], f"unit {len(forward)}")
    if len(root):
        hook(bwd_start - 7, "pre_backward", len(root), "root")
    backward = sorted(units)
    previous = bwd_start - 6  # the root's pre-backward prefetches the first unit of the backward
    for j, (a, b) in enumerate(backward):
        begin = int(ready[a - 1]) if a > 0 else bwd_start
        after = int(ready[backward[j - 2][1] - 1]) + 2 if j >= 2 else -1
        number = len(backward) - j
        hook(begin - 1 if a > 0 else bwd_start - 5, "pre_backward", b - a, f"unit {number}")
        rows.collective(step, "unshard", C.ALLGATHER, float(wire[a:b].sum()), dt, previous + 5, after,
                        f"FSDP unit {number} backward all-gather ({b - a} params)")
        rows.wait(step, begin + 1, "unshard")
        if fsdp2:
            _copy_out(rows, step, nbytes, np.arange(a, b), begin + 2, f"unit {number}")
        previous = begin
        hook(int(ready[b - 1]) + 1, "post_backward", b - a, f"unit {number}")
        _reduce(rows, step, wire, nbytes, np.arange(a, b), int(ready[b - 1]), dt, f"unit {number}")
    if len(root):
        hook(int(ready[root].max()) + 1, "post_backward", len(root), "root")
        _reduce(rows, step, wire, nbytes, root, int(ready[root].max()), dt, "root")
    last = int(ready.max()) if len(ready) else bwd_end
    if fsdp2:
        rows.hook(step, max(bwd_end, last) + 7, H.FSDP2_ROOT_CALLBACK_U, "FSDP2 root post-backward callback")
    rows.wait(step, max(bwd_end, last) + 8, "reduce")
    return warnings


def fsdp_unit_ranges(f: pd.DataFrame, wrap: str, joins: Optional[np.ndarray] = None
                     ) -> tuple[list[tuple[int, int]], list[str]]:
    """FSDP's units over one step's parameters (scale/units.py: shapes, dtypes and the forward op of each; ``joins``:
    the forward's residual adds and concatenations of feature maps, params.feature_joins)."""
    shapes = f["shape"].tolist()
    return fsdp_units(list(zip(shapes, f["dtype"].tolist())), wrap, shapes, f["forward_ns"].tolist(), joins)


def step_units(tables: Any, params: Params, step: int, wrap: str = "blocks"
               ) -> tuple[pd.DataFrame, list[tuple[int, int]], list[str]]:
    """One step's parameters and the FSDP units plan() infers over them (its unit ranges, warnings)."""
    f = params.of_step(step)
    spans = backward_spans(tables)
    joins = feature_joins(tables, step, int(spans.at[step, "start_ns"])) if step in spans.index else None
    return (f, *fsdp_unit_ranges(f, wrap, joins))


def _copy_out(rows: _Rows, step: int, nbytes: np.ndarray, members: np.ndarray, at: int, what: str) -> None:
    """FSDP2's all-gather copy-out: the gathered buffer split into the unit's unsharded parameters (a read and a
    write of every byte: torch.ops.fsdp.split_with_sizes_copy, _fsdp_collectives.foreach_all_gather_copy_out)."""
    rows.copy(step, FSDP2_COPY_OUT, "kernel", 2.0 * float(nbytes[members].sum()), at, f"FSDP2 {what} copy-out")


def _fsdp2_optimizer(rows: _Rows, tables: Any, step: int, nparams: int) -> None:
    """The optimizer's step over DTensor parameters (scale/dp_host.py): at the step's Optimizer.step, priced by the
    foreach ops the one-GPU step runs there (1 where it runs none: a per-parameter loop)."""

    ops = tables.ops
    in_step = ops[S.STEP].to_numpy() == step
    opt = np.flatnonzero(in_step & ops[S.NAME].str.startswith("Optimizer.step").to_numpy())
    if not len(opt):
        return
    start, end = int(ops[S.TS].iat[opt[0]]), int(ops[S.END].iat[opt[0]])
    inside = in_step & (ops[S.TS].to_numpy() >= start) & (ops[S.END].to_numpy() <= end)
    foreach = int((inside & ops[S.NAME].str.startswith("aten::_foreach_").to_numpy()).sum())
    rows.hook(step, start, H.fsdp2_optimizer_u(nparams, foreach), f"FSDP2 optimizer over {nparams} DTensors")


def _reduce(rows: _Rows, step: int, wire: np.ndarray, nbytes: np.ndarray, members: np.ndarray, at: int, dtype: str,
            what: str) -> None:
    """The unit's post-backward: its flat gradient and pre-divide on the compute stream, then the reduce-scatter."""
    rows.copy(step, FSDP_FLATTEN, "kernel", FSDP_PASS_BYTES * float(nbytes[members].sum()), at + 1, f"FSDP {what} grad")
    rows.collective(step, "reduce", C.REDUCESCATTER, float(wire[members].sum()), dtype, at + 3, at + 2,
                    f"FSDP {what} reduce-scatter ({len(members)} params)")

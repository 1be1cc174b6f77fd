"""Price NCCL collectives by NCCL's own alpha-beta model over the origin's and the target's interconnect.

Contract: ``apply(trace, prediction, target) -> Prediction`` re-times the NCCL kernels of a prediction the
compute engine made (method ``collective``), or keeps their measured time (method ``collective-measured``,
with the reason and one warning) where the trace or the catalog lacks what the model needs. Pure: reads
the ingest tables and two GpuSpecs; what-ifs (``--interconnect/--gpus-per-node/--nodes``) travel in the
target's ``extra`` (``with_deployment``).

Ratio form: target time = origin time x model(target) / model(origin). A collective's measured kernel time
holds its transfer plus whatever the origin added: waiting for the other ranks (the kernel spins until the
last rank joins), contention with overlapped compute for SMs and memory, NCCL's channel count. The model
knows none of these, so it predicts only how the *transfer* changes; the ratio carries the origin's share of
the rest over unchanged (the multi-rank replay, timeline/joint.py, then separates the waiting).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np
import pandas as pd

from habitat_trace.ingest import classify as K
from habitat_trace.ingest import schema as S
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.prediction import COLLECTIVE, COLLECTIVE_MEASURED, IDENTITY, Prediction

# --- NCCL's tuning model: NVIDIA/nccl src/graph/tuning.cc (commit 01afd20a, NCCL 2.8), latencies in µs ---
PROTOCOLS = ("LL", "LL128", "SIMPLE")
# baseLat[algorithm][protocol]: Tree, Ring (CollNet, NVLS, PAT are priced as Ring: the cited table predates them)
BASE_LAT_US = {"TREE": (4.4, 4.4, 0.0), "RING": (3.6, 10.0, 8.4)}
# hwLat[hardware][algorithm][protocol]: the latency of one step over NVLink, PCIe or the network
HW_LAT_US = {
    "nvlink": {"TREE": (0.52, 1.2, 28.0), "RING": (0.47, 1.9, 3.4)},
    "pcie": {"TREE": (1.0, 1.9, 28.0), "RING": (1.0, 2.5, 5.7)},
    "net": {"TREE": (5.0, 8.5, 50.0), "RING": (2.7, 4.0, 9.6)},
}
# PCIe x16 per direction, GB/s: 8/16/32/64 GT/s per lane x 16 lanes x 128b/130b encoding / 8 bits
# (PCI-SIG PCIe 3.0-6.0 base specifications; 6.0's FLIT mode is taken at the same 128/130 efficiency)
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 126.0}

# nccl-tests bus-bandwidth factors (NVIDIA/nccl-tests doc/PERFORMANCE.md): busbw = algbw x factor(n)
ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, BROADCAST, REDUCE, SENDRECV = (
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv")
COLLECTIVE_ALIASES = {  # PyTorch's "Collective name" spellings and NCCL kernel-name tokens
    "allreduce": ALLREDUCE, "all_reduce": ALLREDUCE, "allreduce_coalesced": ALLREDUCE,
    "allgather": ALLGATHER, "all_gather": ALLGATHER, "_allgather_base": ALLGATHER,
    "all_gather_into_tensor": ALLGATHER, "allgather_into_tensor_coalesced": ALLGATHER,
    "reducescatter": REDUCESCATTER, "reduce_scatter": REDUCESCATTER, "_reduce_scatter_base": REDUCESCATTER,
    "reduce_scatter_tensor": REDUCESCATTER, "reduce_scatter_tensor_coalesced": REDUCESCATTER,
    "alltoall": ALLTOALL, "all_to_all": ALLTOALL, "all_to_allv": ALLTOALL, "alltoall_base": ALLTOALL,
    "broadcast": BROADCAST, "reduce": REDUCE, "send": SENDRECV, "recv": SENDRECV, "sendrecv": SENDRECV,
}
DTYPE_BYTES = {"float": 4, "float32": 4, "int": 4, "int32": 4, "half": 2, "bfloat16": 2, "float16": 2,
               "short": 2, "double": 8, "long": 8, "int64": 8, "byte": 1, "char": 1, "bool": 1, "int8": 1,
               "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
ALGORITHMS = r"RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT"
_ALGO = re.compile(rf"_({ALGORITHMS})(?=_|\(|$)")
_PROTO = re.compile(r"_(LL128|LL|SIMPLE)(?=_|\(|$)")
_COLL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
DEFAULT_ALGORITHM, DEFAULT_PROTOCOL = "RING", "SIMPLE"  # NCCL's choice for large messages: a stated default

# The channels (CTAs, one SM each) NCCL's ring collectives run with inside a node. NVLink: 24, measured: the grid
# of every ncclDevKernel_{AllReduce,AllGather,ReduceScatter} in our 2- and 4-rank H100 SXM (NV18) runs, NCCL 2.28.9,
# 2026-11-26 (benchmarks/results/scaleout/); NCCL's ring search finds 12 rings over 18 NVLinks at sm90's 20.6 GB/s
# a link and ncclTopoPostset doubles them (src/graph/search.cc, connect.cc). PCIe: 2, assumed: one ring found over
# a PCIe tree, doubled (NCCL_DEBUG=INFO "Channel 00/02" on PCIe-only hosts); not measured here.
NCCL_CHANNELS = {"nvlink": 24, "pcie": 2}
WHATIF_KEYS = ("whatif_interconnect", "whatif_gpus_per_node", "whatif_nodes")
INTERCONNECTS = ("nvlink", "pcie")


@dataclass(frozen=True)
class Topology:
    """Where a group of ``ranks`` runs: ``nodes`` nodes, ``link`` inside a node, ``*_gbs`` per GPU per direction."""

    ranks: int
    nodes: int
    link: str  # "nvlink" or "pcie"
    intra_gbs: float
    inter_gbs: float  # per node, over the network; nan for one node


def with_deployment(spec: GpuSpec, interconnect: Optional[str] = None, gpus_per_node: Optional[int] = None,
                    nodes: Optional[int] = None) -> GpuSpec:
    """``spec`` with what-if deployment options for its collectives (the compute model ignores them)."""
    extra = dict(spec.extra)
    for key, value in zip(WHATIF_KEYS, (interconnect, gpus_per_node, nodes)):
        if value is not None:
            extra[key] = value
    return replace(spec, extra=extra)


def without_deployment(spec: GpuSpec) -> GpuSpec:
    if not any(k in spec.extra for k in WHATIF_KEYS):
        return spec
    return replace(spec, extra={k: v for k, v in spec.extra.items() if k not in WHATIF_KEYS})


def topology(spec: GpuSpec, ranks: int) -> tuple[Optional[Topology], str]:
    """The interconnect ``ranks`` GPUs of ``spec`` talk over (its usual node, or the what-ifs), or None and why."""
    x: dict[str, Any] = dict(spec.extra)  # sourced catalog values (numbers) and what-ifs
    per_node = int(x.get("whatif_gpus_per_node") or x.get("node_gpus") or ranks)  # no node given: one node
    nodes = int(x.get("whatif_nodes") or math.ceil(ranks / max(per_node, 1)))
    nodes = max(1, min(nodes, ranks))
    ppn = math.ceil(ranks / nodes)
    link = x.get("whatif_interconnect")
    if link is None:  # NVLink spans the node on the parts whose usual node is an NVLink node; bridges join pairs
        link = "nvlink" if "nvlink_gbs" in x and ("node_gpus" in x or ppn <= 2) else "pcie"
    if link == "nvlink":
        if "nvlink_gbs" not in x:
            return None, f"{spec.name} has no NVLink in the catalog"
        intra = float(x["nvlink_gbs"]) / 2.0  # the catalog's NVLink figure is bidirectional
    else:
        gen = x.get("pcie_gen")
        if gen not in PCIE_X16_GBS:
            return None, f"{spec.name}: no PCIe generation in the catalog"
        intra = PCIE_X16_GBS[int(gen)]
    inter = math.nan
    if nodes > 1:
        if "node_network_gbps" not in x:
            return None, f"{spec.name}: no inter-node network in the catalog for {nodes} nodes"
        inter = float(x["node_network_gbps"]) / 8.0
    return Topology(ranks, nodes, str(link), intra, inter), ""


def nccl_channels(topo: Topology) -> int:
    """The channels NCCL runs a collective with over ``topo``'s link (NCCL_CHANNELS)."""
    return NCCL_CHANNELS.get(topo.link, NCCL_CHANNELS["pcie"])


def bus_factor(coll: str, n: np.ndarray | int) -> np.ndarray:
    """nccl-tests' busbw / algbw: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; else 1."""
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    if coll == ALLREDUCE:
        return 2.0 * (n - 1.0) / n
    if coll in (ALLGATHER, REDUCESCATTER, ALLTOALL):
        return (n - 1.0) / n
    return np.ones_like(n)


def model_us(coll: str, algo: str, proto: str, nbytes: float, topo: Topology) -> float:
    """NCCL's time estimate, µs: latency + bytes / algorithm bandwidth (tuning.cc ncclTopoGetAlgoTime)."""
    a = "TREE" if algo == "TREE" else "RING"
    p = PROTOCOLS.index(proto)
    n, nodes = topo.ranks, topo.nodes
    bus = topo.intra_gbs if nodes == 1 else min(topo.intra_gbs, topo.inter_gbs)
    # protocol efficiency (tuning.cc "model refinements"): LL moves 8-byte lines with 4 bytes of data and flags
    if a == "RING" and proto == "LL":
        bus *= 0.25 if (nodes > 1 or coll in (ALLREDUCE, REDUCE)) else 1.0 / 3.0
    elif a == "RING" and proto == "LL128":
        bus *= 0.92 if n / nodes >= 2 else 0.7
    elif a == "TREE":
        bus *= 0.9 * {"LL": 1.0 / 3.8, "LL128": 7.0 / 9.0 if nodes == 1 else 0.915, "SIMPLE": 1.0}[proto]
    # bandwidth term: ring and others by the nccl-tests bus factor; tree all-reduce at half the bus bandwidth
    factor = 2.0 if a == "TREE" else float(bus_factor(coll, n))
    transfer = nbytes * factor / (bus * 1e3)  # B / (GB/s x 1e3) = µs
    # latency term: a base per algorithm/protocol plus one hop latency per step (intra-node or network)
    steps = {ALLREDUCE: 2 * (n - 1), ALLGATHER: n - 1, REDUCESCATTER: n - 1}.get(coll, n)
    inter_steps = {ALLREDUCE: 2 * (nodes - 1), ALLGATHER: nodes - 1, REDUCESCATTER: nodes - 1}.get(coll, nodes)
    intra_lat = HW_LAT_US[topo.link][a][p] * (1.8 if nodes > 1 and proto == "LL" else 1.0)
    inter_lat = HW_LAT_US["net"][a][p]
    if a == "TREE":
        lat = 2 * ((n // nodes - 1) * intra_lat + math.log2(nodes) * inter_lat)
    elif nodes == 1:
        lat = steps * intra_lat
    else:
        lat = (steps - inter_steps) * intra_lat + inter_steps * inter_lat
    return BASE_LAT_US[a][p] + lat + transfer


def parse_kernel(name: str) -> tuple[str, str, str]:
    """(collective, algorithm, protocol) from an NCCL kernel name ("" where the name does not say):
    ``ncclKernel_AllReduce_RING_LL_Sum_float(...)``, ``ncclDevKernel_AllGather_RING_LL(...)``."""
    c, a, p = _COLL.search(name), _ALGO.search(name), _PROTO.search(name)
    coll = COLLECTIVE_ALIASES.get(c.group(1).lower(), "") if c else ""
    return coll, a.group(1) if a else "", p.group(1) if p else ""


def collective_fields(trace: Any) -> pd.DataFrame:
    """Per NCCL kernel (rows of trace.gpu of class nccl): collective, algorithm, protocol, bytes, group size,
    process group and Seq (NaN / NONE / "" where unknown); the kernel's own fields first (trace.collectives,
    by event), then those of the op that launched it or of an enclosing ``record_param_comms``."""
    g, ops, c = trace.gpu, trace.ops, trace.collectives
    rows = np.flatnonzero(g[S.KCLASS].to_numpy() == K.NCCL)
    known = c[S.EVENT].to_numpy() if len(c) else np.zeros(0, dtype=np.int64)
    index = pd.Index(known)
    own_at = index.get_indexer(g[S.EVENT].to_numpy()[rows]) if len(known) else np.full(len(rows), -1)
    their_at = np.full(len(rows), -1)
    if len(known) and len(ops):
        op_events = ops[S.EVENT].to_numpy()
        src = _comms_op(np.isin(op_events, known), ops[S.PARENT].to_numpy(), g[S.OP].to_numpy()[rows])
        their_at = np.where(src >= 0, index.get_indexer(op_events[np.maximum(src, 0)]), -1)

    def field(column: str, kind: str) -> np.ndarray:
        default: Any = S.NONE if kind == "int" else ""
        values = c[column].to_numpy(dtype=np.int64 if kind == "int" else object) if len(c) else np.array([default])
        own = np.where(own_at >= 0, values[np.maximum(own_at, 0)], default)
        theirs = np.where(their_at >= 0, values[np.maximum(their_at, 0)], default)
        return np.where(own == default, theirs, own)

    kinds = dict(S.COLLECTIVE_ARGS.values())
    f = {name: field(name, kinds[name]) for name in S.COLLECTIVE_COLUMNS}
    parsed = [parse_kernel(str(n)) for n in g[S.NAME].to_numpy()[rows]]
    coll = [COLLECTIVE_ALIASES.get(str(x).lower(), "") or k[0] for x, k in zip(f[S.COLL_NAME], parsed)]
    size = np.array([DTYPE_BYTES.get(str(d).lower(), 0) for d in f[S.COLL_DTYPE]], dtype=np.float64)
    nelems = np.maximum(f[S.COLL_IN_NELEMS], f[S.COLL_OUT_NELEMS]).astype(np.float64)
    nbytes = np.where((nelems > 0) & (size > 0), nelems * size, np.nan)
    return pd.DataFrame({"row": rows, "collective": coll, "algorithm": [k[1] for k in parsed],
                         "protocol": [k[2] for k in parsed], "bytes": nbytes,
                         "group_size": f[S.COLL_GROUP_SIZE].astype(np.int64), "pg": f[S.COLL_PG_NAME],
                         "seq": f[S.COLL_SEQ].astype(np.int64)})


def _comms_op(has: np.ndarray, parent: np.ndarray, op: np.ndarray, levels: int = 4) -> np.ndarray:
    """The nearest op at or above ``op`` (a few levels: c10d wrappers, nccl:* annotations) that carries a
    collective (``has``), -1 where none."""
    out = np.full(len(op), S.NONE, dtype=np.int64)
    cur = np.asarray(op, dtype=np.int64).copy()
    for _ in range(levels):
        live = (cur >= 0) & (out < 0)
        hit = live & has[np.maximum(cur, 0)]
        out[hit] = cur[hit]
        cur = np.where(live & ~hit, parent[np.maximum(cur, 0)], S.NONE)
    return out


def transfer_ratio(f: pd.DataFrame, origin: GpuSpec, target: GpuSpec) -> tuple[np.ndarray, np.ndarray]:
    """model(target) / model(origin) per row of ``collective_fields``, and the reason where it cannot be priced."""
    ratio = np.full(len(f), np.nan)
    why = np.full(len(f), "", dtype=object)
    cache: dict[tuple, tuple[float, str]] = {}
    for i, (coll, algo, proto, nbytes, n) in enumerate(zip(
            f["collective"], f["algorithm"], f["protocol"], f["bytes"].tolist(), f["group_size"].tolist())):
        key = (coll, algo, proto, nbytes, n)
        if key not in cache:
            cache[key] = _ratio(coll, algo or DEFAULT_ALGORITHM, proto or DEFAULT_PROTOCOL, nbytes, int(n),
                                origin, target)
        ratio[i], why[i] = cache[key]
    return ratio, why


def _ratio(coll: str, algo: str, proto: str, nbytes: float, n: int, origin: GpuSpec,
           target: GpuSpec) -> tuple[float, str]:
    if not coll:
        return math.nan, "collective not named in the trace or the kernel name"
    if not math.isfinite(nbytes) or n < 1:
        return math.nan, "no message size or group size in the trace"
    t_o, why_o = topology(origin, n)
    t_t, why_t = topology(target, n)
    if t_o is None or t_t is None:
        return math.nan, why_o or why_t
    return model_us(coll, algo, proto, nbytes, t_t) / model_us(coll, algo, proto, nbytes, t_o), ""


def apply(trace: Any, p: Prediction, target: GpuSpec) -> Prediction:
    """``p`` with its NCCL kernels priced by the collective model (``target`` may carry what-ifs)."""
    rows = np.flatnonzero(trace.gpu[S.KCLASS].to_numpy() == K.NCCL)
    whatif = any(k in target.extra for k in WHATIF_KEYS)
    if not len(rows) or ((p.method[rows] == IDENTITY).all() and not whatif):
        return replace(p, target=target)
    f = collective_fields(trace)
    ratio, why = transfer_ratio(f, p.origin, target)
    t_o = trace.gpu[S.DUR].to_numpy()[rows].astype(np.float64)
    ok = np.isfinite(ratio)
    dur, method, reason = p.dur_ns.copy(), p.method.copy(), p.reason.copy()
    dur[rows] = np.maximum(np.rint(np.where(ok, t_o * np.where(ok, ratio, 1.0), t_o)), 1).astype(np.int64)
    method[rows] = np.where(ok, COLLECTIVE, COLLECTIVE_MEASURED)
    reason[rows] = np.where(ok, "", "measured time kept: " + why.astype(str))
    warnings = list(p.warnings)
    kept = int((~ok).sum())
    if kept:
        first = str(why[~ok][0])
        warnings.append(f"{kept} NCCL kernels keep their measured time (method '{COLLECTIVE_MEASURED}'): {first}")
    return replace(p, target=target, dur_ns=dur, method=method, reason=reason, warnings=tuple(warnings))

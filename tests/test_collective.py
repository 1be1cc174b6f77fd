"""The collective model (scale/collective.py): NCCL's alpha-beta model in ratio form, its properties, the
catalog's interconnect fields, what-ifs, and measured time kept (with a warning) where fields are missing."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from habitat_trace.ingest import schema as S
from tests.emit_helpers import tables_of
from habitat_trace.scale import collective as C
from habitat_trace.scale.engine import predict
from habitat_trace.scale.prediction import COLLECTIVE, COLLECTIVE_MEASURED, IDENTITY
from habitat_trace.scale.specs import load_catalog
from tests.conftest import DATA
from tests.dist_helpers import ALLREDUCE, ddp_trace

CATALOG = load_catalog(None)
COLLS = (C.ALLREDUCE, C.ALLGATHER, C.REDUCESCATTER, C.ALLTOALL, C.BROADCAST, C.REDUCE)
HTA_FIXTURE = DATA / "a100_nccl_step5.json.gz"  # tests/data/README.md


def test_bus_factors_are_nccl_tests() -> None:
    assert C.bus_factor(C.ALLREDUCE, 8) == pytest.approx(2 * 7 / 8)
    for coll in (C.ALLGATHER, C.REDUCESCATTER, C.ALLTOALL):
        assert C.bus_factor(coll, 4) == pytest.approx(3 / 4)
    assert C.bus_factor(C.BROADCAST, 8) == 1.0 and C.bus_factor(C.REDUCE, 8) == 1.0


@pytest.mark.parametrize("name, want", [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", ("allreduce", "RING", "LL")),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", ("broadcast", "RING", "LL")),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ("allgather", "RING", "LL")),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
     ("reducescatter", "RING", "LL128")),
    ("ncclDevKernel_AllReduce_Sum_f32_TREE_SIMPLE(ncclDevKernelArgsStorage<4096ul>)", ("allreduce", "TREE", "SIMPLE")),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", ("sendrecv", "", "")),
])
def test_kernel_names(name: str, want: tuple) -> None:
    assert C.parse_kernel(name) == want


def _topo(gbs: float, n: int, nodes: int = 1, net: float = 50.0, link: str = "nvlink") -> C.Topology:
    return C.Topology(n, nodes, link, gbs, net if nodes > 1 else math.nan)


@given(coll=st.sampled_from(COLLS), algo=st.sampled_from(("RING", "TREE")), proto=st.sampled_from(C.PROTOCOLS),
       nbytes=st.floats(1, 1e10), n=st.integers(2, 64), bw=st.floats(1, 2000), more=st.floats(1.0, 10.0))
@example(coll="allreduce", algo="RING", proto="LL", nbytes=1.0, n=2, bw=1.0, more=1.0)
def test_more_bandwidth_is_never_slower(coll: str, algo: str, proto: str, nbytes: float, n: int, bw: float,
                                        more: float) -> None:
    slow = C.model_us(coll, algo, proto, nbytes, _topo(bw, n))
    fast = C.model_us(coll, algo, proto, nbytes, _topo(bw * more, n))
    assert fast <= slow
    nodes = 2 if n >= 4 else 1
    assert C.model_us(coll, algo, proto, nbytes, _topo(bw, n, nodes, net=bw * more)) <= \
        C.model_us(coll, algo, proto, nbytes, _topo(bw, n, nodes, net=bw))


@given(coll=st.sampled_from(COLLS), n=st.integers(2, 64))
def test_large_messages_scale_with_bandwidth(coll: str, n: int) -> None:
    """Bandwidth-bound: twice the bus bandwidth, half the time (latency vanishes for 100 GB)."""
    a = C.model_us(coll, "RING", "SIMPLE", 1e11, _topo(100, n))
    b = C.model_us(coll, "RING", "SIMPLE", 1e11, _topo(200, n))
    assert b / a == pytest.approx(0.5, rel=1e-3)
    assert a == pytest.approx(1e11 * float(C.bus_factor(coll, n)) / 100e3, rel=1e-3)


@given(name=st.sampled_from(["V100", "A100", "H100", "A100 PCIe 80GB", "L4", "T4"]), n=st.integers(1, 64),
       nbytes=st.floats(1, 1e10), coll=st.sampled_from(COLLS))
def test_same_gpu_and_interconnect_is_identity(name: str, n: int, nbytes: float, coll: str) -> None:
    spec = CATALOG.resolve(name)
    assert C._ratio(coll, "RING", "LL", nbytes, n, spec, spec)[0] == 1.0


def test_same_gpu_keeps_nccl_kernels_identical() -> None:
    t = tables_of("ddp.json", ddp_trace(device="Tesla V100-SXM2-32GB"))
    v100 = CATALOG.resolve("V100")
    p = predict(t, v100, v100)
    assert (p.method == IDENTITY).all() and (p.dur_ns == t.gpu[S.DUR].to_numpy()).all()


def test_catalog_interconnects() -> None:
    """Per GPU and direction: NVLink half the catalog's bidirectional figure; PCIe x16 by generation."""
    v100, a100, h100 = (C.topology(CATALOG.resolve(g), 8)[0] for g in ("V100", "A100", "H100"))
    assert (v100.intra_gbs, a100.intra_gbs, h100.intra_gbs) == (150.0, 300.0, 450.0)
    assert v100.link == a100.link == "nvlink" and v100.nodes == 1
    l4 = C.topology(CATALOG.resolve("L4"), 8)[0]
    assert l4.link == "pcie" and l4.intra_gbs == 31.5
    two = C.topology(CATALOG.resolve("A100"), 16)[0]
    assert two.nodes == 2 and two.inter_gbs == 200.0  # 8 x 200 Gb/s HDR


def test_whatifs_change_only_collectives() -> None:
    t = tables_of("ddp.json", ddp_trace(device="Tesla V100-SXM2-32GB", world=8))
    v100, a100 = CATALOG.resolve("V100"), CATALOG.resolve("A100")
    base = predict(t, v100, a100)
    pcie = predict(t, v100, C.with_deployment(a100, interconnect="pcie"))
    nodes = predict(t, v100, C.with_deployment(a100, nodes=2))
    nccl = (t.gpu[S.NAME] == ALLREDUCE).to_numpy()
    assert (pcie.dur_ns[nccl] > base.dur_ns[nccl]).all() and (nodes.dur_ns[nccl] > base.dur_ns[nccl]).all()
    assert (pcie.dur_ns[~nccl] == base.dur_ns[~nccl]).all()
    # a what-if on the origin's own GPU prices the collectives, the compute stays identical
    same = predict(t, v100, C.with_deployment(v100, interconnect="pcie"))
    assert (same.method[~nccl] == IDENTITY).all() and (same.method[nccl] == COLLECTIVE).all()


def test_missing_fields_keep_measured_time_with_a_warning() -> None:
    """Issue 18 item 8: no message size / group size -> the measured time, its own method, a warning."""
    t = tables_of("old.json", ddp_trace(device="Tesla V100-SXM2-32GB", with_size=False))
    p = predict(t, CATALOG.resolve("V100"), CATALOG.resolve("A100"))
    nccl = (t.gpu[S.NAME] == ALLREDUCE).to_numpy()
    assert (p.method[nccl] == COLLECTIVE_MEASURED).all()
    assert (p.dur_ns[nccl] == t.gpu[S.DUR].to_numpy()[nccl]).all()
    assert all("message size" in r for r in p.reason[nccl])
    assert any("NCCL kernels keep their measured time" in w for w in p.warnings)


def test_dlrm_style_a100_node_faster_than_v100_node() -> None:
    """Issue 18 item 8 / issue 21: 8 V100 ranks, NCCL ~90% of kernel time. Scaled like compute (clock and
    waves: 8 CTAs) the NCCL kernels came out slower on an A100; priced by NVLink 3 vs 2 they halve."""
    t = tables_of("dlrm.json", ddp_trace(device="Tesla V100-SXM2-32GB", world=8, gemm_us=100, nccl_us=900,
                                             nelems=50_000_000))
    v100, a100 = CATALOG.resolve("V100"), CATALOG.resolve("A100")
    p = predict(t, v100, a100)
    nccl = (t.gpu[S.NAME] == ALLREDUCE).to_numpy()
    assert (p.method[nccl] == COLLECTIVE).all()
    ratio = p.dur_ns[nccl].sum() / t.gpu[S.DUR].to_numpy()[nccl].sum()
    assert 0.45 < ratio < 0.55  # bandwidth-bound: 150 -> 300 GB/s per direction
    assert p.dur_ns.sum() < 0.7 * t.gpu[S.DUR].sum()


def test_hta_nccl_fixture_v100_node_slower_for_the_collectives() -> None:
    """The trimmed public HTA trace (A100, 2 ranks, DDP ResNet): its all-reduces and broadcasts priced by the
    model; a V100 node's NVLink 2 takes twice as long for the bandwidth-bound ones."""
    from habitat_trace.ingest import load

    t = load(HTA_FIXTURE)
    origin = CATALOG.for_device(t.device_name)
    p = predict(t, origin, CATALOG.resolve("V100"))
    nccl = (t.gpu[S.KCLASS] == "nccl").to_numpy()
    assert nccl.sum() == 9 and (p.method[nccl] == COLLECTIVE).all()
    f = C.collective_fields(t)
    assert set(f["collective"]) == {"allreduce", "broadcast"} and (f["group_size"] == 2).all()
    big = f["row"].to_numpy()[f["bytes"].to_numpy() > 4e6]
    assert len(big) >= 3
    r = p.dur_ns[big] / t.gpu[S.DUR].to_numpy()[big]
    assert np.all((r > 1.8) & (r <= 2.0))

"""Scale-out's inputs: the parameters recovered from a one-GPU trace (scale/params.py), DDP's buckets and FSDP's units
(scale/dataparallel.py, scale/units.py) against hand-made tables and the buckets a real 2-rank DDP run built."""
from __future__ import annotations

import gzip
import io
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.errors import HabitatTraceError, SpecError, TraceFormatError
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import from_document, load
from habitat_trace.scale import collective as C
from habitat_trace.scale import dataparallel as D
from habitat_trace.scale import dp_host as H
from habitat_trace.scale.params import COUNTER_DTYPE, SOURCE_ACCUMULATE, SOURCE_WEIGHTS, buffers, recover
from habitat_trace.scale.specs import load_catalog
from habitat_trace.scale.units import best_run, fsdp_units
from tests.conftest import DATA, EXTERNAL, MLP_FIXTURE, TRACES, needs_external, needs_shared

CATALOG = load_catalog(None)
MIB = 1 << 20


def _table(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text.strip()), sep=r"\s*,\s*", engine="python")


# ---------------------------------------------------------------- DDP buckets (reducer.cpp rules)
# Gradient-ready order, bytes and dtype per tensor; expected bucket per tensor (0 = reduced first). Limits 1 MiB then
# 4 MiB. Rules pinned: the first bucket closes once it reaches 1 MiB (b and c); a tensor alone beyond the cap closes
# its own bucket (d); the cap is ">=" (f+g reach exactly 4 MiB); each dtype has its own open bucket and its own limit
# sequence (the bf16 tensors h, i, k: h+i close at 1 MiB for bf16's first bucket); open buckets come last (j, k).
BUCKETS = """
name, nbytes,  dtype,          bucket
a,    524288,  float,          0
b,    262144,  float,          0
c,    262144,  float,          0
d,    9437184, float,          1
e,    1048576, float,          3
h,    524288,  c10::BFloat16,  2
i,    524288,  c10::BFloat16,  2
f,    1048576, float,          3
g,    2097152, float,          3
j,    4096,    float,          4
k,    4096,    c10::BFloat16,  5
"""


def test_ddp_buckets_follow_compute_bucket_assignment_by_size() -> None:
    want = _table(BUCKETS)
    got = D.ddp_buckets(want["nbytes"].to_numpy(), want["dtype"].to_numpy(), (MIB, 4 * MIB))
    bucket_of = {i: b for b, members in enumerate(got) for i in members}
    assert [bucket_of[i] for i in range(len(want))] == want["bucket"].tolist()


def test_a_bucket_never_closes_below_its_limit() -> None:
    sizes = np.array([MIB // 2] * 3)
    assert D.ddp_buckets(sizes, np.array(["float"] * 3), (MIB, 25 * MIB)) == [[0, 1], [2]]


@needs_shared
@needs_external
def test_recovered_resnet50_buckets_are_those_ddp_built_on_two_a100s() -> None:
    """Our H100 ResNet-50 trace's parameters, bucketed by DDP's rules at the defaults (1 MiB, 25 MiB), give the
    all-reduce sizes of the public 2-rank DDP ResNet-50 run (HTA's a100_nccl: 2,049,000 ... elements per step)."""
    params = recover(load(TRACES / "h100-sxm" / "resnet50_b64_fp32.pt.trace.json.gz")).of_step(1)
    buckets = D.ddp_buckets(params["nbytes"].to_numpy(), params["dtype"].to_numpy(), (MIB, 25 * MIB))
    ours = [int(params["numel"].to_numpy()[b].sum()) for b in buckets]
    ddp = load(EXTERNAL / "a100_nccl.json.gz")
    f = C.collective_fields(ddp)
    step = ddp.gpu[S.STEP].to_numpy()[f["row"].to_numpy()]
    theirs = (f["bytes"][(f["collective"] == C.ALLREDUCE).to_numpy() & (step == 1)] // 4).astype(int).tolist()
    assert ours == theirs == [2049000, 7875584, 6563840, 6637568, 2431040]


# ---------------------------------------------------------------- DDP's buffer broadcast
RESNET_STEP = DATA / "resnet50_cl_bn_step.pt.trace.json.gz"  # tests/data/README.md


def test_buffers_are_what_a_real_ddp_resnet50_run_broadcast() -> None:
    """The running statistics of our H100 ResNet-50 step's 53 BatchNorms are the buffers the public 2-rank DDP
    ResNet-50 run broadcast at its forward (HTA's a100_nccl, read here: its broadcasts' In msg nelems per dtype)."""
    bufs = buffers(load(RESNET_STEP))
    ours = bufs.groupby("dtype")["nbytes"].agg(["size", "sum"])
    doc = json.loads(gzip.decompress((DATA / "a100_nccl_step5.json.gz").read_bytes()))
    theirs: dict[str, int] = {}
    for e in doc["traceEvents"]:
        a = e.get("args", {})
        if e.get("name") == "record_param_comms" and a.get("Collective name") == "broadcast":
            theirs.setdefault(a["dtype"], a["In msg nelems"])  # the forward's first broadcast of each dtype
    assert theirs == {"Float": ours.at["float", "sum"] // 4, "Long": ours.at[COUNTER_DTYPE, "size"]}
    assert ours.at["float", "size"] == 2 * ours.at[COUNTER_DTYPE, "size"] == 106


def test_ddp_broadcasts_the_buffers_at_each_forward_and_fsdp_does_not() -> None:
    tables = load(RESNET_STEP)
    params, h100 = recover(tables), CATALOG.resolve("H100")
    on = D.plan(tables, params, h100, D.ScaleOut(world_size=2))
    off = D.plan(tables, params, h100, D.ScaleOut(world_size=2, broadcast_buffers=False))
    fsdp = D.plan(tables, params, h100, D.ScaleOut(world_size=2, strategy="fsdp"))
    casts = on.kernels[on.kernels["collective"] == C.BROADCAST]
    assert sorted(casts["dtype"]) == ["Float", "Long"] and casts["nbytes"].sum() == 212480 + 424
    assert (on.kernels["name"] == D.DDP_BUFFER_COPY).sum() == 159 == len(on.kernels) - len(off.kernels) - 4
    added = on.host["host_u"].sum() - off.host["host_u"].sum()
    assert added == pytest.approx(H.ddp_buffers_u(159)) and H.ddp_buffers_u(159) > H.ddp_buffers_u(2) > 0
    assert not (off.kernels["collective"] == C.BROADCAST).any() and not (fsdp.kernels["collective"] == C.BROADCAST).any()
    assert len(on.waits) == len(off.waits) + 1  # the compute stream waits for the broadcast before the forward


@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_more_buffers_never_cost_the_host_less(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert 0 <= H.ddp_buffers_u(lo) <= H.ddp_buffers_u(hi) and H.ddp_buffers_u(0) == 0


# ---------------------------------------------------------------- FSDP units
def _sig(*blocks: list[str]) -> list[str]:
    return [s for b in blocks for s in b]


BLOCK = ["fc2.w", "fc2.b", "fc1.w", "fc1.b", "ln.w", "ln.b"]


def test_transformer_blocks_are_units_and_the_rest_the_root() -> None:
    # gradient-ready order: head, final norm (shaped like a block's norm), 4 blocks, embeddings
    sig = _sig(["head"], ["ln.w", "ln.b"], BLOCK * 4, ["pos", "tok"])
    units, warnings = fsdp_units(sig)
    assert units == [(3, 9), (9, 15), (15, 21), (21, 27)] and warnings == []
    assert fsdp_units(sig, "none") == ([], [])


def test_no_repeated_block_is_one_unit_with_a_warning() -> None:
    units, warnings = fsdp_units(["a", "b", "c", "d", "e"])
    assert units == [] and "no repeated block" in warnings[0]


def test_every_run_becomes_units_longest_first() -> None:
    small, big = ["x.w", "x.b", "y.w"], ["p", "q", "r", "s"]
    sig = _sig(["stem"], big * 3, ["odd"], small * 2, ["tail"])
    assert best_run(np.array(pd.factorize(pd.Series(sig))[0])) == (1, 4, 3)
    units, _ = fsdp_units(sig)
    assert units == [(1, 5), (5, 9), (9, 13), (14, 17), (17, 20)]


@needs_shared
@pytest.mark.parametrize("name, units, size, root, first", [
    ("gpt2_b8_s1024_amp", 12, 12, 5, 3),  # 12 GPT-2 blocks; root: lm_head, ln_f, wpe, wte
    # identical bottlenecks of the 4 stages; root: stem, fc, each stage's first. The last block starts right after
    # the fc's two tensors (its bn3, conv3, ... conv1: the residual add before the fc marks the end; main's
    # equal-shape phase put it two tensors later, #31)
    ("resnet50_b64_fp32", 12, 9, 53, 2),
])
def test_units_on_real_traces(name: str, units: int, size: int, root: int, first: int) -> None:
    t = load(TRACES / "h100-sxm" / f"{name}.pt.trace.json.gz")
    f, got, _ = D.step_units(t, recover(t), 1)
    assert len(got) == units and {b - a for a, b in got} == {size} and got[0][0] == first
    assert len(f) - sum(b - a for a, b in got) == root


# ---------------------------------------------------------------- parameter recovery
def test_mlp_fixture_parameters() -> None:
    p = recover(load(MLP_FIXTURE))
    assert p.source == SOURCE_ACCUMULATE and p.warnings == () and p.steps == [0, 1]
    s = p.summary()
    assert s["count"] == 16 and s["numel"] == 8 * (256 * 256 + 256) and s["nbytes"] == 4 * s["numel"]
    f = p.of_step(0)
    assert f["shape"].tolist() == [(256,), (256, 256)] * 8  # bias then weight, last layer first
    assert (np.diff(f["ready_ns"]) >= 0).all() and (f["forward_ns"] > 0).all()
    # the last layer's weight was used last in the forward and is ready first in the backward
    assert f["forward_ns"].iat[1] > f["forward_ns"].iat[15]


@needs_shared
def test_gpt2_parameters_from_the_shared_trace() -> None:
    p = recover(load(TRACES / "h100-sxm" / "gpt2_b8_s1024_amp.pt.trace.json.gz"))
    s = p.summary()
    # 12 blocks x 12 tensors + ln_f (2) + wte, wpe, an untied lm_head: 149 fp32 tensors (AMP keeps fp32 weights)
    assert s["count"] == 149 and s["numel"] == 163_037_184 and s["bytes_by_dtype"] == {"float": 652_148_736}
    assert p.of_step(1)["shape"].iat[0] == (50257, 768)  # the lm_head's gradient is ready first


def _document(drop: str = "", strip: str = "") -> dict:
    """The MLP fixture without the events whose name contains ``drop``, and without the shapes of those whose name
    starts with ``strip``."""
    doc = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
    events = []
    for e in doc["traceEvents"]:
        name = str(e.get("name", ""))
        if drop and drop in name:
            continue
        if strip and name.startswith(strip) and "args" in e:
            e = {**e, "args": {k: v for k, v in e["args"].items() if k not in ("Input Dims", "Input type")}}
        events.append(e)
    return {**doc, "traceEvents": events}


def test_without_accumulate_grad_the_weight_ops_are_read_with_a_warning() -> None:
    p = recover(from_document("mlp", _document(drop="AccumulateGrad")))
    assert p.source == SOURCE_WEIGHTS and "counted twice" in p.warnings[0]
    assert p.summary()["numel"] == 8 * (256 * 256 + 256)
    assert p.of_step(0)["ready_ns"].nunique() == 1  # every gradient at the backward's end: no overlap claimed


def test_accumulate_grad_without_shapes_falls_back() -> None:
    p = recover(from_document("mlp", _document(strip="torch::autograd::AccumulateGrad")))
    assert p.source == SOURCE_WEIGHTS and "carry no shapes" in p.warnings[0]


def test_no_shapes_at_all_is_refused_with_the_fix() -> None:
    with pytest.raises(TraceFormatError, match="record_shapes=True"):
        recover(from_document("mlp", _document(drop="AccumulateGrad", strip="aten::")))


def test_no_backward_is_refused_with_the_fix() -> None:
    with pytest.raises(TraceFormatError, match="no backward pass"):
        recover(from_document("mlp", _document(drop="evaluate_function")))


# ---------------------------------------------------------------- the plan's options and pricing
@pytest.mark.parametrize("kwargs, message", [
    ({"world_size": 0}, "world size"), ({"strategy": "zero"}, "strategy"), ({"bucket_mb": 0}, "bucket"),
    ({"world_size": 2, "nodes": 3}, "nodes"), ({"interconnect": "ib"}, "interconnect"),
    ({"comm_dtype": "int4"}, "comm dtype"), ({"protocol": "ll"}, "protocol"), ({"fsdp_wrap": "layers"}, "wrap"),
    ({"nccl_channels": -1}, "NCCL channels"),
])
def test_bad_options_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(HabitatTraceError, match=message):
        D.ScaleOut(**kwargs)


def test_a_gpu_without_a_link_is_refused_with_the_fix() -> None:
    t4 = CATALOG.resolve("T4")
    bare = t4.__class__(**{**t4.__dict__, "extra": {}})
    with pytest.raises(SpecError, match="--interconnect"):
        D.deployed(bare, D.ScaleOut(world_size=2))


def test_price_is_nccls_fastest_choice() -> None:
    topo = C.Topology(8, 1, "nvlink", 450.0, float("nan"))
    small, algo, proto = D.price(C.ALLREDUCE, 4096, topo, D.ScaleOut(world_size=8))
    assert proto in ("LL", "LL128")  # latency-bound: a low-latency protocol
    big, algo, proto = D.price(C.ALLREDUCE, 1 << 30, topo, D.ScaleOut(world_size=8))
    assert (algo, proto) == ("RING", "SIMPLE")
    assert big == pytest.approx(1e3 * C.model_us(C.ALLREDUCE, "RING", "SIMPLE", 1 << 30, topo), abs=1)
    forced, _, p = D.price(C.ALLREDUCE, 1 << 30, topo, D.ScaleOut(world_size=8, protocol="LL"))
    assert p == "LL" and forced > big

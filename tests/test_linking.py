"""Golden tests for the linking rules (ingest/linking.py), Perfetto diff-test style: each test is a tiny
inline trace and the expected linked table, written as CSV. References to other rows are shown by name."""
from __future__ import annotations

import io
import json
from pathlib import Path
from textwrap import dedent
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.linking import op_parents
from habitat_trace.ingest.trace import Tables

CPU, GPU = 100, 0  # pids of the host process and of the GPU


def op(name: str, ts: float, dur: float, tid: Any = 1, pid: Any = CPU, ext: int = -1,
       cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": {"External id": ext}}


def step(n: int, ts: float, dur: float, tid: Any = 1) -> dict[str, Any]:
    return op(f"ProfilerStep#{n}", ts, dur, tid=tid, cat="user_annotation")


def call(name: str, ts: float, dur: float, corr: int, tid: Any = 1, ext: int = -1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": CPU, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "External id": ext}}


def kernel(name: str, ts: float, dur: float, corr: int, ext: int = -1, stream: int = 7) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": GPU, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr, "External id": ext,
                     "grid": [1, 1, 1], "block": [128, 1, 1], "registers per thread": 32}}


def flow(ph: str, fid: int, ts: float, pid: Any = CPU, tid: Any = 1) -> dict[str, Any]:
    return {"ph": ph, "cat": "ac2g", "name": "ac2g", "id": fid, "pid": pid, "tid": tid, "ts": ts}


def load_events(tmp_path: Path, events: list[dict[str, Any]]) -> Tables:
    path = tmp_path / "tiny.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}]}))
    return load(path, require_gpu=False)


def ops_table(t: Tables) -> pd.DataFrame:
    names = t.ops[S.NAME].to_numpy()
    df = t.ops[[S.NAME, S.TID, S.DEPTH]].copy()
    df["parent"] = [names[p] if p >= 0 else "" for p in t.ops[S.PARENT]]
    df["root"] = [names[r] for r in t.ops[S.ROOT_OP]]
    return df


def gpu_table(t: Tables) -> pd.DataFrame:
    steps = t.steps[S.NAME].to_numpy() if len(t.steps) else []
    df = t.gpu[[S.NAME, S.LAUNCH_NAME, S.OP_NAME, S.ROOT_OP_NAME]].copy()
    df["launch"] = t.gpu[S.LAUNCH].to_numpy()
    df["step"] = [steps[s] if s >= 0 else "" for s in t.gpu[S.STEP]]
    return df


def assert_table(df: pd.DataFrame, expected: str) -> None:
    """Compare as CSV text (every cell as a string; empty = none)."""
    got = df.astype(str).to_csv(index=False).strip()
    want = pd.read_csv(io.StringIO(dedent(expected).strip()), dtype=str, keep_default_na=False)
    assert got == want.to_csv(index=False).strip(), f"\n--- got\n{got}\n--- want\n{want.to_csv(index=False)}"


def test_ops_nest_by_time_with_ties_and_zero_length_ops(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        op("short_first_in_file", 0, 50),  # starts with A but shorter: A (longer) is the parent
        op("A", 0, 100),
        op("zero_inside", 10, 0),  # zero-length op inside B's span nests in it
        op("zero_at_end", 50, 0),  # starts where B ends: B is closed, A is not
        op("after", 100, 10),  # starts where A ends: a root
        op("twin1", 200, 50), op("twin2", 200, 50),  # identical spans: the earlier event is the parent
        op("other_thread", 5, 500, tid=2),  # overlaps everything but on another thread: a root
    ])
    assert_table(ops_table(t), """
        name,tid,depth,parent,root
        short_first_in_file,1,1,A,A
        A,1,0,,A
        zero_inside,1,2,short_first_in_file,A
        zero_at_end,1,1,A,A
        after,1,0,,after
        twin1,1,0,,twin1
        twin2,1,1,twin1,twin1
        other_thread,2,0,,other_thread
    """)


def test_call_links_to_innermost_op_on_its_thread(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        op("aten::linear", 0, 100), op("aten::addmm", 10, 50), op("aten::relu", 70, 20),
        call("cudaLaunchKernel", 20, 5, corr=1),  # inside addmm
        call("cudaLaunchKernel", 65, 2, corr=2),  # after addmm, still inside linear
        call("cudaLaunchKernel", 75, 2, corr=3),  # inside relu
        call("cudaLaunchKernel", 30, 2, corr=4, tid=9),  # no op on thread 9
        call("cudaLaunchKernel", 60, 1, corr=5),  # at addmm's last instant: still addmm
    ])
    names = t.ops[S.NAME].to_numpy()
    got = pd.DataFrame({"correlation": t.calls[S.CORRELATION], "op": [names[o] if o >= 0 else "" for o in t.calls[S.OP]]})
    assert_table(got, """
        correlation,op
        1,aten::addmm
        2,aten::linear
        3,aten::relu
        4,
        5,aten::addmm
    """)


def test_kernel_links_to_launch_by_correlation_and_graph_launch_owns_many(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        step(1, 0, 1000),
        op("aten::mm", 10, 40), call("cudaLaunchKernel", 20, 5, corr=11),
        op("graph_replay", 100, 50), call("cudaGraphLaunch", 110, 10, corr=12),
        kernel("gemm_kernel", 60, 30, corr=11),
        kernel("graph_k1", 200, 10, corr=12), kernel("graph_k2", 210, 10, corr=12), kernel("graph_k3", 220, 10, corr=12),
    ])
    assert_table(gpu_table(t), """
        name,launch_name,op_name,root_op_name,launch,step
        gemm_kernel,cudaLaunchKernel,aten::mm,aten::mm,0,ProfilerStep#1
        graph_k1,cudaGraphLaunch,graph_replay,graph_replay,1,ProfilerStep#1
        graph_k2,cudaGraphLaunch,graph_replay,graph_replay,1,ProfilerStep#1
        graph_k3,cudaGraphLaunch,graph_replay,graph_replay,1,ProfilerStep#1
    """)


def test_kernel_without_launch_takes_op_and_step_from_external_id(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        step(1, 0, 100), step(2, 100, 100),
        op("aten::add", 10, 20, ext=7),
        op("aten::mul", 120, 20, ext=8), call("cudaLaunchKernel", 125, 5, corr=30),
        kernel("launched", 150, 5, corr=30),
        kernel("queued_before_window", 160, 5, corr=31, ext=7),  # launch not recorded, op known: its op's step
        kernel("unknown_op", 170, 5, corr=32, ext=999),  # neither launch nor op: no op, no step
    ])
    assert_table(gpu_table(t), """
        name,launch_name,op_name,root_op_name,launch,step
        launched,cudaLaunchKernel,aten::mul,aten::mul,0,ProfilerStep#2
        queued_before_window,,aten::add,aten::add,-1,ProfilerStep#1
        unknown_op,,,,-1,
    """)


def test_trace_without_any_launch_assigns_steps_by_gpu_time(tmp_path: Path) -> None:
    t = load_events(tmp_path, [step(1, 0, 100), step(2, 100, 100),
                               kernel("k1", 50, 5, corr=1), kernel("k2", 150, 5, corr=2), kernel("k3", 250, 5, corr=3)])
    assert list(gpu_table(t)["step"]) == ["ProfilerStep#1", "ProfilerStep#2", ""]


def test_step_follows_the_launch_when_the_gpu_runs_behind(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        step(1, 0, 100), step(2, 100, 100),
        op("aten::mm", 80, 15), call("cudaLaunchKernel", 90, 2, corr=1),
        kernel("late_kernel", 150, 40, corr=1),  # runs during step 2's CPU span, launched in step 1
    ])
    assert list(gpu_table(t)["step"]) == ["ProfilerStep#1"]


def test_backward_op_on_another_thread_launches_its_kernels(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        step(1, 0, 1000),
        op("aten::linear", 10, 50, tid=1),
        op("autograd::engine::evaluate_function: AddmmBackward0", 100, 80, tid=2),
        op("AddmmBackward0", 105, 70, tid=2), op("aten::mm", 110, 30, tid=2),
        call("cudaLaunchKernel", 115, 5, corr=5, tid=2),
        kernel("gemm_bwd", 130, 20, corr=5),
    ])
    assert_table(gpu_table(t), """
        name,launch_name,op_name,root_op_name,launch,step
        gemm_bwd,cudaLaunchKernel,aten::mm,autograd::engine::evaluate_function: AddmmBackward0,0,ProfilerStep#1
    """)


def test_string_pids_and_flow_end_without_start(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        op("span_annotation", 0, 500, pid="Spans", tid="PyTorch Profiler", cat="user_annotation"),
        op("aten::add", 10, 20, tid="thread 1 (python)"),
        call("cudaLaunchKernel", 12, 3, corr=9, tid="thread 1 (python)"),
        kernel("add_kernel", 40, 5, corr=9),
        flow("f", 9, 40, pid=GPU, tid=7),  # the flow's end; its start ("s") was never written
        flow("f", 77, 41, pid=GPU, tid=7),  # a flow end matching no call at all
    ])
    assert_table(ops_table(t), """
        name,tid,depth,parent,root
        span_annotation,PyTorch Profiler,0,,span_annotation
        aten::add,thread 1 (python),0,,aten::add
    """)
    assert list(t.ops[S.PID]) == ["Spans", str(CPU)]
    assert list(gpu_table(t)["op_name"]) == ["aten::add"]
    assert list(t.flows[S.FLOW_ID]) == [9, 77] and set(t.flows[S.PHASE]) == {"f"}


def test_microsecond_floats_become_exact_integer_nanoseconds(tmp_path: Path) -> None:
    t = load_events(tmp_path, [
        kernel("a", 4457346609398.043, 1.001, corr=1),
        kernel("b", 4457346609399.999, 0.001, corr=2),
        kernel("c", 1727743122.5, 2.5, corr=3),
        kernel("d", 17, 3, corr=4),  # integers (2021 format)
    ])
    assert list(t.gpu[S.TS]) == [4457346609398043, 4457346609399999, 1727743122500, 17000]
    assert list(t.gpu[S.DUR]) == [1001, 1, 2500, 3000]
    assert list(t.gpu[S.END]) == [4457346609399044, 4457346609400000, 1727743125000, 20000]
    assert str(t.gpu[S.TS].dtype) == "int64"


def stack_walk_parents(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The reference rule, as a per-op loop: ops sorted by (thread, start, longer first); pop the ops
    that ended at or before this op's start; the stack top is the parent."""
    thread = pd.factorize(ops[S.PID] + ":" + ops[S.TID])[0]
    start = ops[S.TS].to_numpy()
    end = start + ops[S.DUR].to_numpy()
    parent = np.full(len(ops), -1, dtype=np.int64)
    depth = np.zeros(len(ops), dtype=np.int64)
    stack: list[int] = []
    current = -1
    for i in np.lexsort((-end, start, thread)):
        if thread[i] != current:
            stack, current = [], thread[i]
        while stack and end[stack[-1]] <= start[i]:
            stack.pop()
        if stack:
            parent[i], depth[i] = stack[-1], len(stack)
        stack.append(i)
    return parent, depth


spans = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 25)), max_size=60)


@given(spans)
def test_vectorized_nesting_equals_the_stack_walk(rows: list[tuple[int, int, int]]) -> None:
    """Any spans, including ties, zero lengths and improper overlaps (which real traces have)."""
    ops = pd.DataFrame({S.PID: pd.array(["1"] * len(rows), dtype="str"),
                        S.TID: pd.array([str(r[0]) for r in rows], dtype="str"),
                        S.TS: np.array([r[1] for r in rows], dtype=np.int64),
                        S.DUR: np.array([r[2] for r in rows], dtype=np.int64)})
    got_parent, got_depth = op_parents(ops)
    want_parent, want_depth = stack_walk_parents(ops)
    assert got_parent.tolist() == want_parent.tolist()
    assert got_depth.tolist() == want_depth.tolist()

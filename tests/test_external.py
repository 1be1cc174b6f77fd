"""Every public trace in ../shared/data/external-traces ingests with sensible figures or fails clearly
(issue 2's done-when: a test per file). Expectations come from reading each file (SOURCES.md)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from habitat_trace.cli import main
from habitat_trace.analysis.report import summarize
from habitat_trace.errors import UnsupportedTraceError
from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import Tables
from tests.conftest import EXTERNAL, needs_external


def _inspect_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``inspect --format json`` works (JSON on stdout, its warnings on stderr and in the JSON); the summary it is
    built from (analysis.report.summarize, what Trace.summary() returns)."""
    main(["inspect", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"warning: {w}" for w in json.loads(out)["warnings"]]
    return summarize(load(path))


def _linked(t: Tables) -> None:
    k = t.gpu[t.gpu[S.CAT] == S.CAT_KERNEL]
    assert (k[S.LAUNCH] != S.NONE).all() and (k[S.OP] != S.NONE).all() and (k[S.STEP] != S.NONE).all()


def check_2021(t: Tables, s: dict[str, Any]) -> None:
    # categories Kernel/Runtime/Operator, "external id", flows cat "async": linked like the 2.x format
    assert s["format"]["layout"].startswith("kineto-2021")
    assert s["origin"]["name"] == "Tesla V100-DGXS-32GB" and s["origin"]["compute_capability"] == "7.0"
    assert s["steps"]["count"] == 6
    _linked(t)
    assert set(t.gpu[S.LAUNCH_NAME]) == {"cudaLaunchKernel", "cudaMemsetAsync", "cudaMemcpyAsync"}
    assert (t.gpu[S.EXTERNAL_ID] >= 0).all()
    assert (t.flows[S.CAT] == S.CAT_FLOW_LAUNCH).sum() > 0
    assert "CudnnConvolutionBackward" in set(t.gpu[S.ROOT_OP_NAME])
    assert 99.0 < s["steps"]["mean"]["gpu_busy_ms"] < 101.5


def check_ns_resolution(t: Tables, s: dict[str, Any]) -> None:
    assert s["origin"]["name"] == "Tesla V100-SXM2-32GB"
    assert s["steps"]["count"] == 5
    assert (t.gpu[S.TS] % 1000 != 0).mean() > 0.5  # the ns digits survive
    _linked(t)


def check_nccl(t: Tables, s: dict[str, Any]) -> None:
    nccl = t.gpu[t.gpu[S.KCLASS] == "nccl"]
    assert len(nccl) == 21 and nccl[S.NAME].str.startswith("ncclKernel").all()
    assert set(nccl[S.OP_NAME]) == {"nccl:all_reduce", "nccl:broadcast"}
    assert len(s["kernels"]["streams"]) >= 2 and set(nccl[S.STREAM]) != set(t.gpu[S.STREAM])
    assert s["steps"]["count"] == 3
    assert any(r["class"] == "nccl" for r in s["kernels"]["by_class"])


def check_triton(t: Tables, s: dict[str, Any]) -> None:
    (row,) = t.gpu.itertuples()
    assert row.launch_name == "cuLaunchKernel" and row.kclass == "triton"
    assert (row.grid_x, row.block_x) == (1, 128)
    assert s["kernels"]["top"][0]["class"] == "triton"


def check_event_sync(t: Tables, s: dict[str, Any]) -> None:
    assert list(t.syncs[S.SYNC_KIND]) == ["Stream Sync", "Event Sync", "Event Sync", "Context Sync"]
    kinds = set(t.calls.loc[t.calls[S.SYNC_KIND] != "", S.SYNC_KIND])
    assert {"stream", "event", "device", "record"} <= kinds
    assert s["kernels"]["count"] == 5


def check_rocm(t: Tables, s: dict[str, Any]) -> None:
    """HTA's MI250 trace (ROCm 6.2, roctracer layout): launch parameters come from the hip* call (issue 20)."""
    kernels = t.gpu[t.gpu[S.CAT] == "kernel"]
    assert t.vendor == "amd" and (kernels[S.GRID_X] > 0).all() and (kernels[S.REGISTERS] == S.NONE).all()
    assert s["kernels"]["count"] == 16  # 14 kernels + 2 copies


INGESTS: dict[str, Callable[[Tables, dict[str, Any]], None]] = {
    "v100_resnet50_2021_tbplugin.pt.trace.json.gz": check_2021,
    "v100_resnet_ns_resolution.pt.trace.json.gz": check_ns_resolution,
    "a100_nccl.json.gz": check_nccl,
    "a100_triton.json.gz": check_triton,
    "a100_cuda_event_sync.json.gz": check_event_sync,
    "amd_mi250_minitoy_rocm6.json.gz": check_rocm,
}
REFUSED = {
    "cpu_only.pt.trace.json.gz": "no GPU kernels",
}


@needs_external
def test_every_external_trace_has_an_expectation() -> None:
    assert {p.name for p in EXTERNAL.glob("*.gz")} == set(INGESTS) | set(REFUSED)


@needs_external
@pytest.mark.parametrize("name", sorted(INGESTS))
def test_external_trace_ingests(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = EXTERNAL / name
    summary = _inspect_json(path, capsys)
    assert summary["kernels"]["count"] > 0 and summary["steps"]["mean"]["gpu_busy_ms"] > 0
    idle_steps = 1 if name.startswith("amd_") else 0  # the MI250 trace launches nothing in ProfilerStep#2
    for r in summary["steps"]["per_step"]:  # busy time is a union: never above the span
        assert 0 <= r["gpu_busy_ms"] <= r["gpu_span_ms"] + 1e-9
    assert sum(r["gpu_busy_ms"] == 0 for r in summary["steps"]["per_step"]) == idle_steps
    INGESTS[name](load(path), summary)


@needs_external
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_external_trace_is_refused_clearly(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", str(EXTERNAL / name)])
    _, err = capsys.readouterr()
    assert exit_info.value.code == UnsupportedTraceError.exit_code
    assert err.startswith(f"error: {EXTERNAL / name}: {REFUSED[name]}") and err.count("\n") == 1

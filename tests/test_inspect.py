"""``habitat-trace inspect`` on the tests/data fixture (no ../shared needed) and ``report.summarize``."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from habitat_trace.cli import main
from habitat_trace.errors import UsageError
from habitat_trace.ingest import load
from habitat_trace.ingest.classify import NAME_RULES, OTHER
from habitat_trace.analysis.report import short_name, summarize
from tests.conftest import MLP_FIXTURE

# the fixture's row of ground_truth.csv (tests/data/README.md): mean per-step figures in ms
GROUND_TRUTH_MS = {"gpu_busy_ms": 0.296, "gpu_span_ms": 4.670, "cpu_ms": 4.897}
CLASSES = {c for c, _ in NAME_RULES} | {OTHER}


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    main(["inspect", *args, "--format", "json"])
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)  # one JSON object of tables, nothing else on stdout


def test_json_reports_origin_steps_and_ground_truth(capsys: pytest.CaptureFixture[str]) -> None:
    s = _json(capsys, str(MLP_FIXTURE))
    assert set(s) == {"traces", "steps", "classes", "top_kernels", "coverage", "profiler_overhead", "warnings"}
    [t] = s["traces"]
    assert (t["gpu"], t["sms"], t["compute_capability"], t["memory_bytes"]) == (
        "NVIDIA H100 80GB HBM3", 132, "9.0", 85017493504)
    assert t["schemaVersion"] == 1 and t["cuda_runtime_version"] == 13000 and t["prediction"] is None
    assert [r["step"] for r in s["steps"]] == [3, 4, "mean"]
    for key, want in GROUND_TRUTH_MS.items():
        assert s["steps"][-1][key] == pytest.approx(want, rel=0.005)
    assert s["warnings"] == []


def test_json_kernel_classes_top_and_coverage(capsys: pytest.CaptureFixture[str]) -> None:
    s = _json(capsys, str(MLP_FIXTURE), "--top", "3")
    [t] = s["traces"]
    assert sum(r["count"] for r in s["classes"]) == t["gpu_events"] == t["kernels"] == 134
    assert sum(r["total_ms"] for r in s["classes"]) == pytest.approx(t["gpu_ms"])
    assert {r["class"] for r in s["classes"]} <= CLASSES and s["classes"][0]["class"] in ("gemm", "optimizer")
    top = s["top_kernels"]
    assert len(top) == 3
    assert [r["total_ms"] for r in top] == sorted((r["total_ms"] for r in top), reverse=True)
    assert all(r["op"].startswith("aten::") for r in top)
    [c] = s["coverage"]
    assert c == {"file": None, "rank": None, "kernels": 134, "launch_params": 1.0, "registers": 1.0,
                 "launch_call": 1.0, "op": 1.0, "input_dims": 1.0, "step": 1.0}


def test_table_format_prints_every_section(capsys: pytest.CaptureFixture[str]) -> None:
    main(["inspect", str(MLP_FIXTURE), "--top", "2"])
    out, err = capsys.readouterr()
    assert err == ""
    for text in ("NVIDIA H100 80GB HBM3", "SMs", "132", "cc", "9.0", "2 steps", "mean", "0.296", "by class", "gemm",
                 "top kernels", "aten::mm", "launch params", "100.0%", "profiler overhead"):
        assert text in out, text


def test_unknown_format_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", str(MLP_FIXTURE), "--format", "yaml"])
    assert exit_info.value.code == UsageError.exit_code == 2  # a usage error (issue 33, item 7)
    assert capsys.readouterr().err.startswith("error: --format 'yaml'")


def _rewrite(tmp_path: Path, keep: Any, meta: dict[str, Any] | None = None) -> Path:
    doc = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if keep(e)]
    for k, v in (meta or {}).items():
        if v is None:
            doc.pop(k, None)
        else:
            doc[k] = v
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


def test_trace_without_steps_is_one_pseudo_step(tmp_path: Path) -> None:
    path = _rewrite(tmp_path, lambda e: not str(e.get("name", "")).startswith("ProfilerStep#"))
    s = summarize(load(path))
    assert s["steps"]["count"] == 0 and s["steps"]["pseudo_step"]
    (row,) = s["steps"]["per_step"]
    assert row["kernels"] == 134 and row["gpu_busy_ms"] == pytest.approx(2 * 0.296, rel=0.01)
    assert any("pseudo-step" in w for w in s["warnings"])


def test_missing_device_properties_and_shapes_are_warned(tmp_path: Path) -> None:
    def strip(e: dict) -> bool:
        e.get("args", {}).pop("Input Dims", None)
        e.get("args", {}).pop("grid", None)
        return True

    s = summarize(load(_rewrite(tmp_path, strip, {"deviceProperties": None})))
    assert s["origin"]["name"] is None and s["coverage"]["input_dims"] == 0.0
    assert s["coverage"]["launch_params"] == 0.0
    text = " ".join(s["warnings"])
    assert "--from" in text and "record_shapes" in text and "grid/block" in text


@pytest.mark.parametrize("name, short", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
     "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", "at::native::vectorized_elementwise_kernel"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<X<4>, int>(at::Tensor, int)",
     "at::native::(anonymous namespace)::multi_tensor_apply_kernel"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD"),
    ("triton_poi_fused_0", "triton_poi_fused_0"),
])
def test_short_name(name: str, short: str) -> None:
    assert short_name(name) == short
    assert len(short_name("k" * 200)) == 80

"""Issue 9 end to end on shared traces: the Python API and the profiler hook on real H100/H200 recordings."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import habitat_trace
from tests.conftest import TRACES, assert_perfetto_ok, needs_shared
from tests.test_hook import RecordedProfile, workers

GPT2 = TRACES / "h100-sxm" / "gpt2_b8_s1024_amp.pt.trace.json.gz"
GNMT = TRACES / "h200-sxm" / "gnmt_b64_fp32.pt.trace.json.gz"


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("src", [GPT2, GNMT], ids=["gpt2-h100", "gnmt-h200"])
def test_api_load_scale_write_compare(src: Path, tmp_path: Path) -> None:
    trace = habitat_trace.load(src)
    assert trace.gpu in ("H100 SXM5 80GB", "H200 SXM 141GB")
    assert len(trace.kernels) > 100 and len(trace.ops) > 100
    a100 = trace.scale(to="A100")
    assert a100.gpu == "A100 SXM4 80GB" and len(a100.kernels) == len(trace.kernels)
    assert set(a100.kernels["method"]) <= {"wave", "roofline-op", "copy", "fallback", "sustained"}
    out = tmp_path / "a100.pt.trace.json.gz"
    a100.write(out)
    again = habitat_trace.load(out)
    assert (again.kernels["dur_ns"].to_numpy() == a100.kernels["dur_ns"].to_numpy()).all()
    assert_perfetto_ok(out, src)
    frame = habitat_trace.compare(src, to=["A100", "L4"])
    assert isinstance(frame, pd.DataFrame) and list(frame["gpu"])[0] == trace.gpu
    assert frame["speedup"].iloc[0] == 1.0


@needs_shared
@pytest.mark.slow
def test_hook_on_a_shared_recording(tmp_path: Path) -> None:
    handler = habitat_trace.tensorboard_trace_handler(str(tmp_path), to=["A100", "L4"], worker_name="node")
    handler(RecordedProfile(GPT2))
    names = workers(tmp_path)
    assert set(names) >= {"node", "node@A100", "node@L4"}
    for path in tmp_path.glob("node@*.pt.trace.json.gz"):
        assert_perfetto_ok(path, GPT2)

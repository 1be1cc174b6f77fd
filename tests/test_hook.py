"""Profiler hook: a real CPU-only torch.profiler run (original written, one warning), the scaling path with a
recorded H100 trace (one worker per target, loaded by torch-tb-profiler as one run). README/docs snippets: test_readme.py."""
from __future__ import annotations

import gzip
import logging
import os
import re
import shutil
import socket
from pathlib import Path

import orjson
import pytest

import habitat_trace
from habitat_trace.errors import SpecError
from habitat_trace.hook import worker_tag
from tests.conftest import MLP_FIXTURE, assert_perfetto_ok, viewer

STAMPED = re.compile(r"^(?P<worker>.+)\.(?P<ts>\d+)\.pt\.trace\.json\.gz$")


class RecordedProfile:
    """Stands in for torch.profiler.profile: ``export_chrome_trace`` writes a recorded trace."""

    def __init__(self, source: Path = MLP_FIXTURE) -> None:
        self.source = source

    def export_chrome_trace(self, path: str) -> None:
        shutil.copyfile(self.source, path)


def workers(directory: Path) -> dict[str, str]:
    """worker name -> timestamp, from the file names (torch's ``<worker>.<ns>.pt.trace.json.gz``)."""
    found = {}
    for p in directory.iterdir():
        m = STAMPED.match(p.name)
        assert m, p.name
        found[m["worker"]] = m["ts"]
    return found


@pytest.mark.slow
def test_cpu_only_profile_writes_the_original_and_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    handler = habitat_trace.tensorboard_trace_handler(tmp_path / "run", to=["A100", "H100"], worker_name="cpu")
    written = []
    model = torch.nn.Linear(32, 32)
    with caplog.at_level(logging.WARNING, logger="habitat_trace"):
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                     on_trace_ready=lambda prof: written.extend(handler(prof))) as prof:
            for _ in range(4):
                model(torch.randn(8, 32)).sum().backward()
                prof.step()
    assert len(written) == 1 and list(workers(tmp_path / "run")) == ["cpu"]
    assert habitat_trace.hook.log.name == "habitat_trace.hook"
    [record] = [r for r in caplog.records if r.name == "habitat_trace.hook"]
    assert record.levelno == logging.WARNING
    assert "no scaled traces to A100 SXM4 80GB, H100 SXM5 80GB" in record.getMessage()
    assert "no GPU kernels in this trace (CPU-only profile)" in record.getMessage()
    assert_perfetto_ok(written[0])


def test_scaled_workers_side_by_side(tmp_path: Path) -> None:
    written = habitat_trace.tensorboard_trace_handler(tmp_path, to=["A100", "H100"], worker_name="node_7")(
        RecordedProfile())
    found = workers(tmp_path)
    assert sorted(found) == ["node_7", "node_7@A100", "node_7@H100"]
    assert len(set(found.values())) == 1  # one timestamp: one span in TensorBoard
    assert (tmp_path / f"node_7.{found['node_7']}.pt.trace.json.gz").read_bytes() == MLP_FIXTURE.read_bytes()
    gpus = {p.name.split(".")[0]: habitat_trace.load(p).gpu for p in written}
    assert gpus == {"node_7": "H100 SXM5 80GB", "node_7@A100": "A100 SXM4 80GB", "node_7@H100": "H100 SXM5 80GB"}
    for p in written:
        assert_perfetto_ok(p, MLP_FIXTURE)
    header = orjson.loads(gzip.decompress(written[1].read_bytes()))["habitat_trace"]
    assert header["worker"] == "node_7@A100" and header["input"] == written[0].name


def test_default_worker_is_host_pid(tmp_path: Path) -> None:
    habitat_trace.tensorboard_trace_handler(tmp_path, to=["A100"])(RecordedProfile())
    worker = f"{socket.gethostname()}_{os.getpid()}"
    assert sorted(workers(tmp_path)) == [worker, f"{worker}@A100"]


def test_unknown_target_fails_before_training(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown GPU 'A1000'"):
        habitat_trace.tensorboard_trace_handler(tmp_path, to=["A1000"])
    assert list(tmp_path.iterdir()) == []


def test_unknown_origin_keeps_the_original(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    doc = orjson.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
    doc["deviceProperties"][0]["name"] = "NVIDIA Prototype 9000"
    src = tmp_path / "proto.json"
    src.write_bytes(orjson.dumps(doc))
    handler = habitat_trace.tensorboard_trace_handler(tmp_path / "run", to=["A100"], worker_name="w")
    with caplog.at_level(logging.WARNING, logger="habitat_trace"):
        assert len(handler(RecordedProfile(src))) == 1
        assert len(handler(RecordedProfile(src))) == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'NVIDIA Prototype 9000' is not in the catalog" in warnings[0].getMessage()
    with_origin = habitat_trace.tensorboard_trace_handler(tmp_path / "run2", to=["A100"], worker_name="w",
                                                          origin="H100")
    assert len(with_origin(RecordedProfile(src))) == 2


@pytest.mark.parametrize("name,tag", [("A100", "A100"), ("H100 SXM5 80GB", "H100-SXM5-80GB"), ("v1.5", "v1-5")])
def test_worker_tag(name: str, tag: str) -> None:
    assert worker_tag(name) == tag


@pytest.mark.slow
def test_tb_profiler_loads_one_run_with_a_worker_per_gpu(tmp_path: Path) -> None:
    viewer("torch_tb_profiler", "torch-tb-profiler")
    from torch_tb_profiler import consts
    from torch_tb_profiler.io.cache import Cache
    from torch_tb_profiler.profiler.loader import RunLoader

    run_dir = tmp_path / "runs" / "mlp"
    run_dir.mkdir(parents=True)
    habitat_trace.tensorboard_trace_handler(run_dir, to=["A100", "H100"], worker_name="node_7")(RecordedProfile())
    run = RunLoader("mlp", str(run_dir), Cache(str(tmp_path / "cache"))).load()  # what `tensorboard --logdir` runs
    assert run.workers == ["node_7", "node_7@A100", "node_7@H100"]
    assert run.get_spans() == ["1"]
    for worker in run.workers:
        profile = run.get_profile(worker, "1")
        assert consts.KERNEL_VIEW in profile.views and consts.TRACE_VIEW in profile.views, worker

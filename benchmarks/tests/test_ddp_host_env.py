"""benchmarks/collect/ddp_host_env.py: each rank's CPUs are whole physical cores of its own, a bad name is one
error line, and a CPU dry run (gloo, the tiny MLP) writes one row per setting and mode with every rank's figures."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from tests.conftest import ROOT

pytest.importorskip("torch")
sys.path.insert(0, str(ROOT / "benchmarks" / "collect"))
import ddp_host_env  # noqa: E402

SCRIPT = ROOT / "benchmarks" / "collect" / "ddp_host_env.py"


@given(st.integers(1, 64), st.integers(1, 2), st.integers(1, 8))
def test_each_rank_gets_whole_cores_of_its_own(n_cores: int, threads: int, world: int) -> None:
    cores = [[c * threads + t for t in range(threads)] for c in range(n_cores)]
    blocks = [ddp_host_env.rank_cpus(r, world, cores) for r in range(world)]
    for block in blocks:
        assert block and len(block) % threads == 0  # SMT siblings stay together
        assert {cpu // threads for cpu in block} <= set(range(n_cores))
    if n_cores >= world:  # enough cores: no two ranks share one
        assert sum(len(b) for b in blocks) == len({cpu for b in blocks for cpu in b})


def test_an_unknown_name_is_one_error_line(tmp_path) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--workloads", "mlp_x",
                          "--dry-run"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "mlp_x" in out.stderr
    assert not (tmp_path / "host_env.jsonl").exists()


@pytest.mark.slow
def test_a_dry_run_writes_every_setting_and_mode(tmp_path) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path), "--world", "2",
                          "--workloads", "mlp_h4096_b64_fp32", "--iters", "2", "--settings", "default,omp1_pinned"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "host_env.jsonl").read_text().splitlines()]
    assert {(r["setting"], r["mode"]) for r in rows} == {(s, m) for s in ("default", "omp1_pinned")
                                                         for m in ddp_host_env.MODES}
    for r in rows:
        assert len(r["per_rank"]) == (1 if r["mode"] == "single" else 2)
        assert all(x["status"] == "ok" and x["median_ms"] > 0 and x["thread_cpu_ms"] > 0 for x in r["per_rank"])
        assert all(isinstance(x["threads_cpu_ms"], dict) and min(x["threads_cpu_ms"].values(), default=0) >= 0
                   for x in r["per_rank"])  # clock ticks of 10 ms: a few CPU steps may show none
        if r["setting"] == "omp1_pinned":
            assert all(x["torch_threads"] == 1 and x["omp_env"] == "1" for x in r["per_rank"])
    assert "cores" in json.loads((tmp_path / "host.json").read_text())

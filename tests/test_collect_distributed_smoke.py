"""CPU smoke test of benchmarks/collect/collect_distributed.py (gloo, tiny sizes): the single-device and DDP steps
are timed and profiled, one trace per rank carries distributedInfo, and the bus-bandwidth sweep writes its rows."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("torch")

SCRIPT = ROOT / "benchmarks" / "collect" / "collect_distributed.py"


def test_dry_run_single_and_ddp(tmp_path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--modes", "single,ddp", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r["mode"]: r for r in map(json.loads, (tmp_path / "ground_truth.jsonl").read_text().splitlines())}
    assert rows["single"]["status"] == rows["ddp"]["status"] == "ok"
    assert len(rows["ddp"]["per_rank_median_ms"]) == 2 and rows["ddp"]["nccl_nvls_enable"] == "0"
    for r in range(2):
        doc = json.loads(gzip.decompress((tmp_path / "ddp" / f"rank{r}.pt.trace.json.gz").read_bytes()))
        assert doc["distributedInfo"]["rank"] == r and doc["distributedInfo"]["world_size"] == 2
    sweep = [json.loads(line) for line in (tmp_path / "busbw.jsonl").read_text().splitlines()]
    ok = [s for s in sweep if s["status"] == "ok" and s["collective"] == "all_reduce"]
    assert ok and all(s["busbw_gbs"] == pytest.approx(s["algbw_gbs"]) for s in ok)  # 2(n-1)/n = 1 for n = 2


def test_unknown_mode_is_refused(tmp_path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--modes", "nope", "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "unknown mode" in proc.stderr

"""CPU smoke test of benchmarks/collect: every workload builds and runs one tiny training step.

Runs the collector's --dry-run in a subprocess (it puts its own folder on sys.path) and reads smoke.jsonl.
torchvision-based workloads may be skipped where torchvision is not installed; nothing may fail.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("torch")

SCRIPT = ROOT / "benchmarks" / "collect" / "collect_traces.py"
TORCHVISION_WORKLOADS = {"vit_l16_b16_amp", "resnet152_b32_cl_amp"}


def _listed() -> list[str]:
    out = subprocess.run([sys.executable, str(SCRIPT), "--list", "--out", "unused"], check=True,
                         capture_output=True, text=True).stdout
    return out.split()


def test_dry_run_builds_and_steps_every_workload(tmp_path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in (tmp_path / "smoke.jsonl").read_text().splitlines()]
    by_name = {r["workload"]: r for r in rows}
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(by_name) == set(_listed())
    assert len(by_name) >= 10
    for name, r in by_name.items():
        if r["status"] == "skipped":
            assert name in TORCHVISION_WORKLOADS and "torchvision" in r["reason"], r
        else:
            assert r["status"] == "ok", r


def test_unknown_workload_is_refused(tmp_path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--only", "nope", "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "unknown workload" in proc.stderr


HELDOUT = ROOT / "benchmarks" / "collect" / "heldout.py"


def test_heldout_dry_run_builds_every_workload_or_names_the_missing_library(tmp_path) -> None:
    """The held-out collector (issue 16's re-measurement): each workload builds and steps on CPU, or is skipped
    because transformers/timm is absent here (they are on the device), never failed."""
    proc = subprocess.run([sys.executable, str(HELDOUT), "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "smoke.jsonl").read_text().splitlines()]
    listed = subprocess.run([sys.executable, str(HELDOUT), "--list", "--out", "unused"], check=True,
                            capture_output=True, text=True).stdout.split()
    assert [r["workload"] for r in rows] == listed and len(listed) == 6
    assert {r["workload"]: r["status"] for r in rows}["lstm_lm_d1024_b32_s128_fp32"] == "ok"  # torch alone
    for r in rows:
        assert r["status"] == "ok" or (r["status"] == "skipped" and ("transformers" in r["reason"]
                                                                      or "timm" in r["reason"])), r


LAUNCH_BOUND = ROOT / "benchmarks" / "collect" / "launch_bound.py"


@pytest.mark.parametrize("which", ["A", "B"])
def test_launch_bound_dry_run_builds_every_workload_or_names_the_missing_library(tmp_path, which: str) -> None:
    """Issue 35's collector: each workload of both sets builds and steps on CPU, or is skipped because a library
    the device has (transformers, timm, torchvision) is absent here, never failed."""
    proc = subprocess.run([sys.executable, str(LAUNCH_BOUND), "--dry-run", "--set", which, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "smoke.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and sum(r["status"] == "ok" for r in rows) >= 6
    for r in rows:
        assert r["status"] == "ok" or (r["status"] == "skipped" and any(
            lib in r["reason"] for lib in ("transformers", "timm", "torchvision"))), r

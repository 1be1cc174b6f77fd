"""CPU smoke test of benchmarks/collect/ddp_breakdown.py (gloo, tiny sizes): the one-GPU step and the four 2-rank
variants of the MLP are timed, one row each, and the no_sync variant launches no all-reduce."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytest.importorskip("torch")

SCRIPT = ROOT / "benchmarks" / "collect" / "ddp_breakdown.py"


def test_every_variant_is_one_timed_row(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path), "--workloads",
                           "mlp_h4096_b64_fp32"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "ddp_breakdown.jsonl").read_text().splitlines()]
    assert [(r["mode"], r["world"]) for r in rows] == [("single", 1), ("solo", 2), ("ddp", 2), ("ddp_nobuf", 2),
                                                       ("ddp_nosync", 2), ("ddp_hooked", 2)]
    assert all(r["status"] == "ok" and r["slowest_rank_ms"] > 0 and len(r["per_rank_median_ms"]) == r["world"]
               for r in rows)
    hooked = rows[-1]  # every bucket's launch seen on both ranks, in the step, and no later than the rank's last one
    assert hooked["buckets"] >= 1 and len(hooked["bucket_skew_ms"]) == hooked["buckets"]
    assert 0 <= hooked["last_bucket_skew_ms"] <= hooked["sum_skew_ms"] + 1e-9
    assert all(0 < t < hooked["slowest_rank_ms"] for t in hooked["last_launch_ms"])


@pytest.mark.parametrize("mode, syncs", [("ddp", True), ("ddp_nosync", False), ("ddp_nobuf", True)])
def test_only_no_sync_runs_forward_and_backward_without_gradient_sync(mode: str, syncs: bool) -> None:
    """What each variant's forward sees: DDP's gradient sync flag (off only inside no_sync) and its buffer broadcast
    (off only for nobuf)."""
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(ROOT / "benchmarks" / "collect"))
    import ddp_breakdown as B
    from dist_workloads import WORKLOADS

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        work = WORKLOADS["mlp_h4096_b64_fp32"](torch.device("cpu"), True)
        seen = []
        loss = work.loss

        def recorded(model: torch.nn.Module) -> torch.Tensor:
            seen.append((model.require_backward_grad_sync, model.broadcast_buffers))
            return loss(model)

        work.loss = recorded  # type: ignore[method-assign]
        B.make_step(work, mode, torch.device("cpu"))()
        assert seen == [(syncs, mode != "ddp_nobuf")]
    finally:
        dist.destroy_process_group()

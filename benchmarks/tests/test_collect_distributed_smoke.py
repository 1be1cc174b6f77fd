"""CPU smoke test of benchmarks/collect/collect_distributed.py (gloo, tiny sizes): every workload runs alone and with
DDP and FSDP2 on 2 ranks (FSDP1 and a missing transformers/torchvision are skipped with the reason), one trace per
rank carries distributedInfo, the output stays within the device tool's 8 files, the FSDP units the collector wraps
are the ones habitat-trace infers from the one-GPU trace, and benchmarks/scaleout_eval.py turns a collected folder
into its table."""
from __future__ import annotations

import gzip
import importlib.util
import io
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, MLP_FIXTURE, ROOT

pytest.importorskip("torch")

SCRIPT = ROOT / "benchmarks" / "collect" / "collect_distributed.py"
HAS = {m: importlib.util.find_spec(m) is not None for m in ("transformers", "torchvision")}
NEEDS = {"gpt2_b8_s1024_amp": "transformers", "llama_d1024_l8_b4_s1024_amp": "transformers",
         "bert_b32_s128_fp32": "transformers", "resnet50_b64_fp32": "torchvision", "mlp_h4096_b64_fp32": None,
         "resnet50_b32_cl_amp": "torchvision", "vit_b16_b64_amp": "torchvision", "gpt2_b2_s512_amp": "transformers",
         "bert_large_b8_s256_amp": "transformers", "convnext_t_b32_amp": "torchvision",
         "mobilenet_v3l_b64_fp32": "torchvision", "opt_d768_l12_b4_s512_amp": "transformers",
         "efficientnet_b0_b64_amp": "torchvision", "distilbert_b16_s256_fp32": "transformers",
         "pythia_d768_l12_b4_s1024_amp": "transformers", "swin_t_b32_amp": "torchvision",
         "densenet121_b32_fp32": "torchvision", "t5_small_b8_s512_amp": "transformers",
         "vgg16_bn_b32_amp": "torchvision", "regnet_y1_6gf_b64_fp32": "torchvision",
         "qwen2_d896_l12_b4_s1024_amp": "transformers", "resnext50_b32_fp32": "torchvision",
         "shufflenet_v2_b128_amp": "torchvision", "mistral_d1024_l8_b4_s1024_amp": "transformers",
         "wide_resnet50_b32_amp": "torchvision", "bloom_d1024_l12_b4_s512_amp": "transformers",
         "electra_b16_s256_fp32": "transformers", "efficientnet_v2s_b32_amp": "torchvision",
         "gptneo_d768_l12_b4_s512_fp32": "transformers", "bart_base_b8_s256_fp32": "transformers",
         "googlenet_b64_fp32": "torchvision", "phi_d1024_l8_b4_s1024_amp": "transformers",
         "resnet101_b32_cl_amp": "torchvision", "roberta_b16_s256_amp": "transformers",
         "falcon_d1024_l8_b4_s512_amp": "transformers", "bigcode_d768_l12_b4_s512_fp32": "transformers",
         "resnet34_b64_amp": "torchvision", "mpt_d1024_l8_b4_s512_amp": "transformers",
         "deberta_d768_l6_b16_s256_fp32": "transformers", "squeezenet_b128_fp32": "torchvision",
         "stablelm_d1024_l8_b4_s1024_amp": "transformers", "gemma_d1024_l8_b4_s512_amp": "transformers",
         "mnasnet_b64_amp": "torchvision", "olmo_d1024_l8_b4_s1024_amp": "transformers",
         "gptj_d1024_l8_b4_s512_fp32": "transformers", "mobilenet_v2_b128_fp32": "torchvision",
         "resnet18_b256_amp": "torchvision", "starcoder2_d1024_l8_b4_s1024_amp": "transformers",
         "ernie_b16_s256_fp32": "transformers", "regnet_x32_b32_fp32": "torchvision",
         "phi3_d1024_l8_b4_s1024_amp": "transformers", "mobilebert_b32_s128_amp": "transformers"}
# FSDP2 cannot shard a channels-last parameter (fully_shard: "FSDP does not support non-contiguous parameters yet")
FSDP2_REFUSES = {"resnet50_b32_cl_amp", "resnet101_b32_cl_amp"}


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), "--modes",
                           "single,ddp,fsdp,fsdp1"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _rows(out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = map(json.loads, (out / "ground_truth.jsonl").read_text().splitlines())
    return {(r["workload"], r["mode"]): r for r in rows}


def _trace(out: Path, member: str) -> dict[str, Any]:
    """A trace of the collected archive (traces.tar.xz.NN: one xz-compressed tar in parts)."""
    data = lzma.decompress(b"".join(p.read_bytes() for p in sorted(out.glob("traces.tar.xz.*"))))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        f = tar.extractfile(member)
        assert f is not None
        return json.loads(f.read())


def test_every_workload_runs_or_says_why(collected: Path) -> None:
    rows = _rows(collected)
    assert set(rows) == {(w, m) for w in NEEDS for m in ("single", "ddp", "fsdp", "fsdp1")}
    for (workload, mode), r in rows.items():
        need = NEEDS[workload]
        if mode == "fsdp1":
            assert r["status"] == "skipped: torch's FSDP1 needs an accelerator (CPU dry run)"
        elif need is not None and not HAS[need]:
            assert r["status"].startswith(f"skipped: {need} not importable"), r
        elif mode == "fsdp" and workload in FSDP2_REFUSES:
            assert r["status"].startswith("failed: NotImplementedError"), r
        else:
            assert r["status"] == "ok", r
            assert len(r["per_rank_median_ms"]) == (1 if mode == "single" else 2) and r["slowest_rank_ms"] > 0
            assert r["nccl_nvls_enable"] == "0" and r["params"] > 0
            assert all(len(i) == 3 for i in r["per_rank_iter_ms"]) and r["slowest_steady_ms"] > 0


def test_the_output_fits_the_device_tool(collected: Path) -> None:
    files = sorted(p.name for p in collected.iterdir())
    assert len(files) <= 8 and all(p.is_file() for p in collected.iterdir()), files
    assert {"ground_truth.jsonl", "busbw.jsonl", "traces.tar.xz.00"} <= set(files)


def test_one_trace_per_rank_with_distributed_info(collected: Path) -> None:
    for r in range(2):
        doc = _trace(collected, f"mlp_h4096_b64_fp32/ddp-w2/rank{r}.pt.trace.json")
        assert doc["distributedInfo"]["rank"] == r and doc["distributedInfo"]["world_size"] == 2
    assert _trace(collected, "mlp_h4096_b64_fp32/single/rank0.pt.trace.json")["distributedInfo"]["world_size"] == 1
    sweep = [json.loads(line) for line in (collected / "busbw.jsonl").read_text().splitlines()]
    ok = [s for s in sweep if s["status"] == "ok" and s["collective"] == "all_reduce"]
    assert ok and all(s["busbw_gbs"] == pytest.approx(s["algbw_gbs"]) for s in ok)  # 2(n-1)/n = 1 for n = 2
    # nccl-tests sizes an all-gather by its output: world x the input (the 2x H100 run of 2026-11-25 sized it by its
    # input and reported half its bus bandwidth)
    gathered = [s for s in sweep if s["status"] == "ok" and s["collective"] == "all_gather"]
    assert sorted(s["bytes"] for s in gathered) == sorted(2 * s["bytes"] for s in ok)[:len(gathered)]


@pytest.mark.parametrize("workload", list(NEEDS))
def test_the_fsdp_units_wrapped_are_the_ones_inferred(collected: Path, workload: str, tmp_path: Path) -> None:
    """The one-GPU (CPU) trace's parameters give habitat-trace's FSDP units (scale/units.py, as dataparallel.py calls
    it); the collector's wrap predicate (dist_workloads.py) selects as many modules of the tiny model, with the same
    parameter counts."""
    need = NEEDS[workload]
    if need is not None and not HAS[need]:
        pytest.skip(f"{need} is not installed")
    import torch

    from habitat_trace.ingest.trace import load
    from habitat_trace.scale.dataparallel import step_units
    from habitat_trace.scale.params import recover

    from dist_workloads import WORKLOADS

    path = tmp_path / "single.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_trace(collected, f"{workload}/single/rank0.pt.trace.json")).encode()))
    t = load(path, require_gpu=False)
    _, units, _ = step_units(t, recover(t), 0)
    torch.manual_seed(0)
    work = WORKLOADS[workload](torch.device("cpu"), True)
    wrapped = [m for m in work.model.modules() if work.wrap(m)]
    assert sorted(b - a for a, b in units) == sorted(len(list(m.parameters())) for m in wrapped)


def test_unknown_mode_or_workload_is_refused(tmp_path: Path) -> None:
    for flag, value, message in (("--modes", "nope", "unknown mode"), ("--workloads", "vgg", "unknown workload")):
        proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", flag, value, "--out", str(tmp_path)],
                              capture_output=True, text=True)
        assert proc.returncode != 0 and message in proc.stderr


def test_the_one_gpu_mode_alone_needs_one_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--modes single`` runs on a one-GPU machine (the one-GPU traces of docs/distributed.md's cross-host check,
    2026-12-06); any N-rank mode still asks for N GPUs."""
    spec = importlib.util.spec_from_file_location("collect_distributed", SCRIPT)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    monkeypatch.setattr(mod.torch.cuda, "device_count", lambda: 1)
    assert mod.parse(["--out", str(tmp_path), "--modes", "single", "--worlds", "4"]).modes == ["single"]
    with pytest.raises(SystemExit, match="4 GPUs needed, 1 visible"):
        mod.parse(["--out", str(tmp_path), "--modes", "single,ddp", "--worlds", "4"])


def test_the_evaluation_table(tmp_path: Path) -> None:
    """scaleout_eval.py on a folder laid out as the collector writes it: the MLP fixture as the one-GPU trace and the
    public A100 DDP step (rank 0, twice) as the 2-rank traces; plumbing, not accuracy. A workload whose one-GPU
    trace is not a trace is its row with the error, and the others are still evaluated."""
    folder = tmp_path / "run"
    folder.mkdir()
    rows = [{"workload": "w", "mode": "single", "world": 1, "status": "ok", "slowest_rank_ms": 5.0, "device": "x"},
            {"workload": "w", "mode": "ddp", "world": 2, "status": "ok", "slowest_rank_ms": 6.0, "device": "x"},
            {"workload": "v", "mode": "single", "world": 1, "status": "ok", "slowest_rank_ms": 5.0, "device": "x"},
            {"workload": "v", "mode": "ddp", "world": 2, "status": "ok", "slowest_rank_ms": 6.0, "device": "x"}]
    (folder / "ground_truth.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with tarfile.open(folder / "w.tar", "w") as tar:
        for member, src in (("w/single/rank0.pt.trace.json.gz", MLP_FIXTURE),
                            ("w/ddp/rank0.pt.trace.json.gz", DATA / "a100_nccl_step5.json.gz"),
                            ("w/ddp/rank1.pt.trace.json.gz", DATA / "a100_nccl_step5.json.gz"),
                            ("v/single/rank0.pt.trace.json.gz", DATA / "README.md")):
            data = src.read_bytes()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = tmp_path / "table.md"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaleout_eval.py"), str(folder), "--out",
                           str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert "| w | ddp | 2 |" in text and "scale-out from one GPU: mean |error|" in text
    assert "| v | ddp | 2 |" in text and "- v ddp: error: TraceFormatError" in text
    assert "compute_x_r0" in text and "busy_floor_ms" in text
    table = out.with_suffix(".csv").read_text().splitlines()
    assert len(table) == 3 and "scaleout_err" in table[0]
    shutil.rmtree(folder)

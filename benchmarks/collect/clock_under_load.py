"""The SM clock, board power and throttle reasons of the lent GPU under the loads the power-limit rules reason about
(issue 32; scale/rates.py module doc, "Power"), for the catalog's clock figures.

    python benchmarks/collect/clock_under_load.py --out DIR [--seconds 12]

Each phase runs one load back to back for ``--seconds`` while ``nvidia-smi`` samples the GPU every 100 ms:
- ``bf16``, ``fp16``, ``tf32``, ``fp32``: an 8192^3 matmul in that dtype (tf32: float32 with TF32 on; fp32: off),
  its rate from CUDA events over the phase (TFLOP/s);
- ``copy``: a 2 GiB device-to-device copy (GB/s, read + write);
- ``resnet50_amp``: a torchvision ResNet-50 training step (fp16 autocast, channels_last, batch 256, SGD), the
  training load of Lambda's and DLE's tables (steps/s), and ``resnet50_tf32`` in TF32 at batch 128;
- ``bert_large_amp``: BERT-large SQuAD fine-tuning (seq 384, batch 32, fp16 autocast, fused AdamW) and
  ``bert_large_tf32``; ``resnet50_infer_amp``: ResNet-50 inference at batch 1024 (timm's tables);
- the GEMM-heavy steps (whether tensor-core work in a real step runs at the clock a matmul is held to):
  ``vit_base_infer_amp`` (timm's ViT-B/16 inference, fp16 autocast, batch 1024), ``vit_base_train_amp`` (its training
  step, batch 256, fused AdamW), ``gpt2_medium_train_bf16`` (GPT-2 medium language-model training, seq 1024,
  batch 16, bf16 autocast, fused AdamW), and the MLPerf-width steps of workloads.py, ``gpt3_layers_train_bf16`` and
  ``llama70b_lora_train_bf16`` (two GPT-3 175B-wide layers with AdamW; two Llama 2 70B-wide layers, base frozen);
- ``idle``: nothing (the clock the GPU rests at).
The first 2 s of each phase are left out of the clock and power statistics (the ramp), and 3 s of idle separate the
phases. Writes DIR/clock_under_load.csv (one row per phase: median, p10 and p90 SM clock in MHz, median power in W,
the throttle reasons seen, the rate) and DIR/samples.csv (every sample).
"""
from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import torch

QUERY = "timestamp,clocks.sm,clocks.max.sm,power.draw,power.limit,clocks_event_reasons.active,temperature.gpu"
RAMP_S, REST_S = 2.0, 3.0


class Sampler:
    """nvidia-smi sampling every 100 ms in a thread; ``mark`` tags the samples that follow with a phase."""

    def __init__(self) -> None:
        self.rows: list[dict[str, str]] = []
        self.phase = "start"
        self._proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                                       "-lms", "100"], stdout=subprocess.PIPE, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 7:
                self.rows.append(dict(zip(["t", "sm_mhz", "max_mhz", "power_w", "limit_w", "reasons", "temp_c"],
                                          parts), phase=self.phase, wall=f"{time.time():.3f}"))

    def mark(self, phase: str) -> None:
        self.phase = phase

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait()


def run_for(seconds: float, step: Callable[[], None], sync_every: int = 4) -> tuple[int, float]:
    """Run ``step`` back to back for ``seconds``; the number of steps and the GPU time between CUDA events (s)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n, t0 = 0, time.time()
    start.record()
    while time.time() - t0 < seconds:
        step()
        n += 1
        if n % sync_every == 0:
            torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    return n, start.elapsed_time(end) / 1e3


def matmul(dtype: torch.dtype, tf32: bool) -> tuple[Callable[[], None], float]:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    n = 8192
    a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
    return (lambda: torch.mm(a, b)), 2.0 * n ** 3


def copy() -> tuple[Callable[[], None], float]:
    src = torch.empty(2 ** 31, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), 2.0 * src.numel()


def _training(loss: Callable[[], torch.Tensor], opt: torch.optim.Optimizer, amp: bool) -> Callable[[], None]:
    """One training step around ``loss`` (the forward), fp16 autocast when ``amp``; the loss goes through a GradScaler
    either way (as in the run of 2026-12-06)."""
    scaler = torch.amp.GradScaler()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            value = loss()
        scaler.scale(value).backward()
        scaler.step(opt)
        scaler.update()
    return step


def resnet50_train(amp: bool = True, batch: int = 256) -> tuple[Callable[[], None], float]:
    """A torchvision ResNet-50 training step (SGD): fp16 autocast and channels_last (``amp``), else TF32 in NCHW."""
    import torchvision
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    fmt = torch.channels_last if amp else torch.contiguous_format
    m = torchvision.models.resnet50().cuda().to(memory_format=fmt)
    x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=fmt)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    return _training(lambda: torch.nn.functional.cross_entropy(m(x), y), opt, amp), 1.0


def bert_large_train(amp: bool = True) -> tuple[Callable[[], None], float]:
    """BERT-large SQuAD fine-tuning as Lambda's rows (HF BertForQuestionAnswering, random weights, seq 384, batch 32,
    fused AdamW; fp16 autocast (``amp``) or TF32)."""
    from transformers import BertConfig, BertForQuestionAnswering
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    m = BertForQuestionAnswering(cfg).cuda()
    ids = torch.randint(0, cfg.vocab_size, (32, 384), device="cuda")
    pos = torch.randint(0, 384, (32,), device="cuda")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True)
    return _training(lambda: m(input_ids=ids, start_positions=pos, end_positions=pos).loss, opt, amp), 1.0


def resnet50_infer_amp() -> tuple[Callable[[], None], float]:
    """timm's inference benchmark's load: ResNet-50 forward in fp16 autocast, batch 1024, no grad."""
    import torchvision
    m = torchvision.models.resnet50().cuda().eval()
    x = torch.randn(1024, 3, 224, 224, device="cuda")

    def step() -> None:
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
            m(x)
    return step, 1.0


def _vit_base(batch: int) -> tuple[torch.nn.Module, torch.Tensor]:
    import timm
    m = timm.create_model("vit_base_patch16_224").cuda()
    return m, torch.randn(batch, 3, 224, 224, device="cuda")


def vit_base_infer_amp() -> tuple[Callable[[], None], float]:
    """timm's inference benchmark's load on a GEMM-heavy model: ViT-B/16 forward, fp16 autocast, batch 1024."""
    m, x = _vit_base(1024)
    m.eval()

    def step() -> None:
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
            m(x)
    return step, 1.0


def vit_base_train_amp() -> tuple[Callable[[], None], float]:
    """A ViT-B/16 training step (fp16 autocast, batch 256, fused AdamW)."""
    m, x = _vit_base(256)
    y = torch.randint(0, 1000, (x.shape[0],), device="cuda")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    return _training(lambda: torch.nn.functional.cross_entropy(m(x), y), opt, True), 1.0


def gpt2_medium_train_bf16() -> tuple[Callable[[], None], float]:
    """GPT-2 medium language-model training (HF GPT2LMHeadModel, random weights, seq 1024, batch 16, bf16 autocast,
    fused AdamW): an LLM's training load."""
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=24, n_embd=1024, n_head=16, n_positions=1024)
    m = GPT2LMHeadModel(cfg).cuda()
    ids = torch.randint(0, cfg.vocab_size, (16, 1024), device="cuda")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
    return step, 1.0


def collector_workload(name: str) -> tuple[Callable[[], None], float]:
    """A training step of benchmarks/collect/workloads.py (the traces' own builders), one step per call."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from workloads import WORKLOADS
    return WORKLOADS[name].build(torch.device("cuda"), False).step, 1.0


def summarize(rows: list[dict[str, str]], phase: str, t_start: float) -> dict[str, object]:
    got = [r for r in rows if r["phase"] == phase and float(r["wall"]) >= t_start + RAMP_S]
    clocks = sorted(float(r["sm_mhz"]) for r in got if r["sm_mhz"].replace(".", "").isdigit())
    power = [float(r["power_w"]) for r in got if r["power_w"].replace(".", "").isdigit()]
    if not clocks:
        return {"samples": 0}
    q = statistics.quantiles(clocks, n=10) if len(clocks) > 1 else [clocks[0]] * 9
    return {"samples": len(got), "sm_mhz_median": statistics.median(clocks), "sm_mhz_p10": q[0], "sm_mhz_p90": q[-1],
            "power_w_median": statistics.median(power) if power else "", "power_limit_w": got[-1]["limit_w"],
            "max_sm_mhz": got[-1]["max_mhz"], "temp_c_max": max(float(r["temp_c"]) for r in got),
            "reasons": " ".join(sorted({r["reasons"] for r in got}))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--only", default="", help="comma-separated phases (default: all)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    phases: list[tuple[str, Callable[[], tuple[Callable[[], None], float]], str]] = [
        ("bf16", lambda: matmul(torch.bfloat16, False), "TFLOP/s"),
        ("fp16", lambda: matmul(torch.float16, False), "TFLOP/s"),
        ("tf32", lambda: matmul(torch.float32, True), "TFLOP/s"),
        ("fp32", lambda: matmul(torch.float32, False), "TFLOP/s"),
        ("copy", copy, "GB/s"),
        ("resnet50_amp", resnet50_train, "steps/s"),
        ("resnet50_tf32", lambda: resnet50_train(False, 128), "steps/s"),
        ("bert_large_amp", bert_large_train, "steps/s"),
        ("bert_large_tf32", lambda: bert_large_train(False), "steps/s"),
        ("resnet50_infer_amp", resnet50_infer_amp, "steps/s"),
        ("vit_base_infer_amp", vit_base_infer_amp, "steps/s"),
        ("vit_base_train_amp", vit_base_train_amp, "steps/s"),
        ("gpt2_medium_train_bf16", gpt2_medium_train_bf16, "steps/s"),
        ("gpt3_layers_train_bf16", lambda: collector_workload("gpt3_layers_d12288_l2_b1_s2048_bf16"), "steps/s"),
        ("llama70b_lora_train_bf16", lambda: collector_workload("llama70b_lora_layers_d8192_l2_b1_s8192_bf16"),
         "steps/s"),
    ]
    if a.only:
        phases = [p for p in phases if p[0] in a.only.split(",")]
    sampler = Sampler()
    results = []
    try:
        time.sleep(REST_S)
        t0 = time.time()
        sampler.mark("idle")
        time.sleep(a.seconds)
        results.append({"phase": "idle", **summarize(sampler.rows, "idle", t0)})
        for name, build, unit in phases:
            step, work = build()
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            sampler.mark(name)
            t0 = time.time()
            n, gpu_s = run_for(a.seconds, step)
            rate = n * work / gpu_s / (1e12 if unit == "TFLOP/s" else 1e9 if unit == "GB/s" else 1.0)
            sampler.mark(f"rest after {name}")
            results.append({"phase": name, "rate": f"{rate:.2f}", "unit": unit, "steps": n,
                            **summarize(sampler.rows, name, t0)})
            print(results[-1], flush=True)
            del step
            torch.cuda.empty_cache()
            time.sleep(REST_S)
    finally:
        sampler.stop()
    keys = sorted({k for r in results for k in r}, key=lambda k: (k != "phase", k))
    with open(out / "clock_under_load.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(results)
    with open(out / "samples.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(sampler.rows[0]))
        w.writeheader()
        w.writerows(sampler.rows)
    props = torch.cuda.get_device_properties(0)
    (out / "device.txt").write_text(f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}\n")


if __name__ == "__main__":
    main()

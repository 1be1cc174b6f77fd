"""Held-out ground truth for issue 16: workloads and SM counts no overhead fit or constant has seen.

Like collect_traces.py (same ground_truth.jsonl columns, `summarize.py` merges the runs), but:
- other workloads: Hugging Face Llama training and a Llama KV-cache decode loop, HF T5, timm EfficientNet-B0 and
  ViT-S/16, a cuDNN LSTM language model (none of them in benchmarks/traces, ../shared or the profiler-overhead
  calibration of timeline/overhead.py);
- the trace is recorded the way a user of our hook records it, `habitat_trace.schedule(wait=4, warmup=1,
  active=3)`, so it carries the un-profiled wait steps' times (`habitat_unprofiled_step_ns`);
  benchmarks/accuracy.py scores each pair with that measurement and with it stripped (a plain torch.profiler trace).

    python benchmarks/collect/heldout.py --out runs/h100 [--sms 80] [--only a,b] [--iters 20]
    python benchmarks/collect/heldout.py --dry-run --out /tmp/smoke      # CPU, tiny sizes, no profiler

Needs transformers and timm for four of the six workloads (skipped, and said so, where missing).
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import statistics
import sys
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repository: habitat_trace.schedule

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from collect_traces import WARMUP_ITERS, device_info, green_stream, quantile, seed_all, steady_wall_ms  # noqa: E402
from timing import event_times_ms  # noqa: E402
from workloads import Built, SkipWorkload, Workload, _train_step  # noqa: E402

HOOK_SCHEDULE = dict(wait=4, warmup=1, active=3)


def _transformers():
    try:
        import transformers
    except ImportError as exc:
        raise SkipWorkload(f"transformers not importable ({exc})") from exc
    return transformers


def _timm():
    try:
        import timm
    except ImportError as exc:
        raise SkipWorkload(f"timm not importable ({exc})") from exc
    return timm


def _llama_config(tiny: bool):
    tr = _transformers()
    if tiny:
        return tr.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=4, vocab_size=256)
    return tr.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                          num_key_value_heads=16, vocab_size=32000, max_position_embeddings=2048)


def hf_llama(dev: torch.device, tiny: bool) -> Built:
    """HF LlamaForCausalLM (d 1024, 8 layers), batch 4 x 512, bf16 autocast, AdamW."""
    cfg = _llama_config(tiny)
    model = _transformers().LlamaForCausalLM(cfg).to(dev)
    idx = torch.randint(0, cfg.vocab_size, (2 if tiny else 4, 32 if tiny else 512), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: model(input_ids=idx, labels=idx).loss, dev, amp=True),
                 "HF Llama d1024 l8, bf16 autocast")


def hf_llama_decode(dev: torch.device, tiny: bool) -> Built:
    """LLM decode loop: prefill 128 tokens, then 32 greedy steps with the KV cache, batch 4, bf16 weights."""
    cfg = _llama_config(tiny)
    model = _transformers().LlamaForCausalLM(cfg).to(dev, torch.bfloat16).eval()
    prompt = torch.randint(0, cfg.vocab_size, (4, 16 if tiny else 128), device=dev)
    new_tokens = 4 if tiny else 32

    def step() -> None:
        with torch.no_grad():
            out = model(input_ids=prompt, use_cache=True)
            for _ in range(new_tokens):
                tok = out.logits[:, -1:].argmax(-1)
                out = model(input_ids=tok, past_key_values=out.past_key_values, use_cache=True)
    return Built(step, f"HF Llama d1024 l8 decode, {new_tokens} tokens")


def hf_t5(dev: torch.device, tiny: bool) -> Built:
    """HF T5ForConditionalGeneration (t5-small sizes), batch 16, source 256, target 64, bf16 autocast."""
    tr = _transformers()
    ids = dict(decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)  # t5-small's; a bare config has none
    cfg = (tr.T5Config(d_model=64, d_ff=128, num_layers=1, num_heads=4, vocab_size=256, d_kv=16, **ids) if tiny
           else tr.T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128, **ids))
    model = tr.T5ForConditionalGeneration(cfg).to(dev)
    bs = 2 if tiny else 16
    src = torch.randint(0, cfg.vocab_size, (bs, 32 if tiny else 256), device=dev)
    tgt = torch.randint(0, cfg.vocab_size, (bs, 16 if tiny else 64), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: model(input_ids=src, labels=tgt).loss, dev, amp=True),
                 "HF T5-small, bf16 autocast")


def _timm_train(dev: torch.device, name: str, bs: int, res: int, tiny: bool) -> Built:
    timm = _timm()
    model = timm.create_model("resnet18" if tiny else name, pretrained=False).to(dev, memory_format=torch.channels_last)
    bs, res = (2, 32) if tiny else (bs, res)
    x = torch.randn(bs, 3, res, res, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (bs,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(x), y), dev, amp=True), f"timm {name}")


def timm_efficientnet(dev: torch.device, tiny: bool) -> Built:
    return _timm_train(dev, "efficientnet_b0", 64, 224, tiny)


def timm_vit_small(dev: torch.device, tiny: bool) -> Built:
    return _timm_train(dev, "vit_small_patch16_224", 64, 224, tiny)


class LstmLM(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int) -> None:
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(vocab, d), nn.LSTM(d, d, layers, batch_first=True), nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.out(self.rnn(self.emb(idx))[0])


def lstm_lm(dev: torch.device, tiny: bool) -> Built:
    """cuDNN LSTM language model, fp32, SGD: few long kernels (GPU-bound)."""
    vocab, d, layers, bs, seq = (256, 32, 1, 2, 16) if tiny else (10000, 1024, 2, 32, 128)
    model = LstmLM(vocab, d, layers).to(dev)
    idx = torch.randint(0, vocab, (bs, seq), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(idx).flatten(0, 1), idx.flatten()), dev,
                             amp=False), "cuDNN LSTM, fp32")


HELDOUT: dict[str, Workload] = {w.name: w for w in [
    Workload("hf_llama_d1024_l8_b4_s512_amp", hf_llama, 40),
    Workload("hf_llama_decode32_b4", hf_llama_decode, 40),
    Workload("hf_t5_small_b16_s256_amp", hf_t5, 35),
    Workload("timm_efficientnet_b0_b64_amp", timm_efficientnet, 35),
    Workload("timm_vit_s16_b64_amp", timm_vit_small, 35),
    Workload("lstm_lm_d1024_b32_s128_fp32", lstm_lm, 25),
]}


def profile_with_hook(step: Any, path_gz: str) -> tuple[int, int, list[int]]:
    """Record with habitat_trace.schedule, as a user of our hook does; returns (raw, gz bytes, wait-step ns)."""
    import habitat_trace

    raw_path = path_gz[:-3]
    sched = habitat_trace.schedule(**HOOK_SCHEDULE)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, schedule=sched,
                 on_trace_ready=lambda p: p.export_chrome_trace(raw_path)) as prof:
        for _ in range(sum(HOOK_SCHEDULE.values())):
            step()
            prof.step()
    torch.cuda.synchronize()
    with open(raw_path, "rb") as f, gzip.open(path_gz, "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    raw = os.path.getsize(raw_path)
    os.remove(raw_path)
    return raw, os.path.getsize(path_gz), sched.unprofiled_steps_ns()


def collect(w: Workload, outdir: str, iters: int, sms: int, device: dict[str, Any]) -> dict[str, Any]:
    t0 = time.time()
    seed_all()
    built = w.build(torch.device("cuda"), False)
    for _ in range(WARMUP_ITERS):
        built.step()
    torch.cuda.synchronize()
    times = event_times_ms(built.step, iters)
    steady = steady_wall_ms(built.step, iters)
    name = f"{w.name}_sm{sms}" if sms else w.name
    trace = f"{name}.pt.trace.json.gz"
    raw, gz, wait_ns = profile_with_hook(built.step, os.path.join(outdir, trace))
    s = sorted(times)
    return dict(workload=w.name, gpu=device["name"], sms=sms or device["sms"], full_sms=device["sms"],
                torch=torch.__version__, cuda=torch.version.cuda, iters=iters,
                median_ms=statistics.median(times), mean_ms=statistics.mean(times),
                p10_ms=quantile(s, 0.1), p90_ms=quantile(s, 0.9), steady_wall_ms=steady,
                hook_wait_ms=[v / 1e6 for v in wait_ns], trace=trace, trace_bytes=raw, trace_gz_bytes=gz,
                record_shapes=True, profiled_steps=HOOK_SCHEDULE["active"], note=built.note,
                collect_s=round(time.time() - t0, 1))


def main(argv: list[str] | None = None) -> int:
    t_start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=280.0)
    ap.add_argument("--sms", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(HELDOUT))
        return 0
    names = [n for n in a.only.split(",") if n] or list(HELDOUT)
    unknown = [n for n in names if n not in HELDOUT]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; known: {', '.join(HELDOUT)}")
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    if a.dry_run:
        with open(os.path.join(a.out, "smoke.jsonl"), "w") as out:
            for n in names:
                seed_all()
                try:
                    built = HELDOUT[n].build(torch.device("cpu"), True)
                    built.step()
                    r = dict(workload=n, status="ok")
                except SkipWorkload as exc:
                    r = dict(workload=n, status="skipped", reason=str(exc))
                except Exception:
                    traceback.print_exc()
                    r, failed = dict(workload=n, status="failed"), failed + 1
                out.write(json.dumps(r) + "\n")
                print(json.dumps(r), flush=True)
        return 1 if failed else 0
    ctx = green_stream(a.sms) if a.sms else contextlib.nullcontext()
    info = device_info()
    with open(os.path.join(a.out, "device.json"), "w") as f:
        json.dump(info, f)
    with ctx, open(os.path.join(a.out, "ground_truth.jsonl"), "a") as gt:
        for n in names:
            w = HELDOUT[n]
            elapsed = time.time() - t_start
            if elapsed + w.est_s > a.budget_s:
                print(f"SKIP (budget: {elapsed:.0f}s + ~{w.est_s:.0f}s > {a.budget_s:.0f}s) {n}", flush=True)
                continue
            print(f"[{elapsed:6.1f}s] {n}", flush=True)
            try:
                r = collect(w, a.out, a.iters, a.sms, info)
                gt.write(json.dumps(r) + "\n")
                gt.flush()
                print(json.dumps(r), flush=True)
            except SkipWorkload as exc:
                print(f"SKIP {n}: {exc}", flush=True)
            except Exception:
                traceback.print_exc()
                print("FAILED", n, flush=True)
                failed += 1
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

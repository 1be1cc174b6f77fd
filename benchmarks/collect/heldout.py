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

import os
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repository: habitat_trace.schedule

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from collect_traces import parse_args, profile_to_gzip, run_dry, run_gpu, selected  # noqa: E402
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


def profile_with_hook(step: Any, path_gz: str) -> tuple[int, int, dict[str, Any]]:
    """Record with habitat_trace.schedule, as a user of our hook does: (raw, gz bytes, the wait steps' times)."""
    import habitat_trace

    sched = habitat_trace.schedule(**HOOK_SCHEDULE)
    raw, gz = profile_to_gzip(step, path_gz, sched, sum(HOOK_SCHEDULE.values()))
    return raw, gz, dict(profiled_steps=HOOK_SCHEDULE["active"],
                         hook_wait_ms=[v / 1e6 for v in sched.unprofiled_steps_ns()])


def main(argv: list[str] | None = None) -> int:
    t_start = time.time()
    a = parse_args(argv, __doc__)
    if a.list:
        print("\n".join(HELDOUT))
        return 0
    workloads = selected(a.only, HELDOUT)
    os.makedirs(a.out, exist_ok=True)
    return run_dry(workloads, a.out) if a.dry_run else run_gpu(workloads, a, t_start, record=profile_with_hook)


if __name__ == "__main__":
    sys.exit(main())

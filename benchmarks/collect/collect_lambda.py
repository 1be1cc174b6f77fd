"""Lambda's single-GPU training steps (lambdal/deeplearning-benchmark, a fork of NVIDIA DeepLearningExamples) re-created
in plain PyTorch on the lent GPU, for benchmarks/crossarch/lambda_published.py (issue 32).

Adapted from ../shared/tools/collect_lambda.py with one change: BERT's self-attention is computed the way DLE's
modeling.py does it (PyTorch/LanguageModeling/BERT/modeling.py, BertSelfAttention.forward: ``torch.matmul`` of query
and key, scale, add the mask, ``F.softmax``, dropout, ``torch.matmul`` with value), which is HF transformers'
``attn_implementation="eager"``. The shared tool let HF pick SDPA, and in fp32 (TF32) SDPA runs the memory-efficient
attention kernel: 35% of the H100's BERT TF32 step in a latency-bound kernel that moves 1.11x to a B200, where DLE's
step has two batched GEMMs and a softmax that move with the GPU's tensor and memory rates (docs/accuracy.md, "Why the
B200 rows are slow"). ``--attention sdpa`` records the shared tool's step.

ResNet50 v1.5 is the shared tool's (torchvision, SGD momentum, synthetic data; AMP = fp16 autocast + GradScaler with
channels_last, FP32 = TF32 on, NCHW). BERT base/large SQuAD fine-tuning: HF BertForQuestionAnswering, seq 384, fused
AdamW; AMP = fp16 autocast + GradScaler, FP32 = TF32. Timing is the shared tool's, so old and new rows compare: 4
warm-up steps, 8 steps each timed on the host clock around a synchronised step (median, min), then torch.profiler
(CPU + CUDA, record_shapes, schedule wait=1 warmup=1 active=2). The allocator runs with expandable segments, so the
largest batches that fit an 80 GB card in this form are recorded; a batch that does not fit is written as an error
line, and lambda_published.py then takes the largest recorded batch below it (per sample, both sides alike).

    python benchmarks/collect/collect_lambda.py --out DIR [--only bert_base_squad,...] [--attention eager|sdpa]
    python benchmarks/collect/collect_lambda.py --dry-run --out DIR   # CPU: one tiny step per model, no profiler

Writes DIR/<model>_<prec>_b<batch>.pt.trace.json.gz and appends to DIR/measured.jsonl (name, model, precision,
batch, median_ms, min_ms, attention, gpu, torch).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Callable

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")  # before torch allocates

import torch  # noqa: E402

# (model, precision): the per-GPU batches of Lambda's published dev rows, as in the shared tool
RUNS = {
    ("resnet50", "amp"): [1280, 928, 720, 448, 256],
    ("resnet50", "fp32"): [640, 496, 360, 224, 128],
    ("bert_large_squad", "amp"): [112, 64, 48, 28, 16],
    ("bert_large_squad", "fp32"): [64, 32, 28, 16, 12, 8],
    ("bert_base_squad", "amp"): [320, 192, 160, 80, 48],
    ("bert_base_squad", "fp32"): [172, 96, 80, 48, 24],
}
SEQ = 384  # DLE run_squad.py --max_seq_length 384 (Lambda's SQuAD rows)
WARMUP, TIMED = 4, 8


def build(model: str, prec: str, batch: int, attention: str, dev: torch.device,
          tiny: bool = False) -> Callable[[], None]:
    """One training step of ``model`` at ``prec`` and ``batch`` on ``dev`` (``tiny``: a two-layer CPU stand-in)."""
    amp = prec == "amp" and dev.type == "cuda"
    seq = 16 if tiny else SEQ
    if model == "resnet50":
        import torchvision
        m = torchvision.models.resnet50().to(dev)
        x = torch.randn(batch, 3, 32 if tiny else 224, 32 if tiny else 224, device=dev)
        if prec == "amp":
            m = m.to(memory_format=torch.channels_last)
            x = x.to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device=dev)
        opt: torch.optim.Optimizer = torch.optim.SGD(m.parameters(), lr=0.256, momentum=0.875, weight_decay=3.05e-5)

        def loss() -> torch.Tensor:
            return torch.nn.functional.cross_entropy(m(x), y, label_smoothing=0.1)
    else:
        from transformers import BertConfig, BertForQuestionAnswering
        big = model == "bert_large_squad"
        cfg = BertConfig(hidden_size=1024 if big else 768, num_hidden_layers=2 if tiny else (24 if big else 12),
                         num_attention_heads=16 if big else 12, intermediate_size=4096 if big else 3072)
        cfg._attn_implementation = attention
        m = BertForQuestionAnswering(cfg).to(dev)
        ids = torch.randint(0, 30522, (batch, seq), device=dev)
        tt, am = torch.zeros_like(ids), torch.ones_like(ids)
        sp, ep = torch.randint(0, seq, (batch,), device=dev), torch.randint(0, seq, (batch,), device=dev)
        opt = torch.optim.AdamW(m.parameters(), lr=3e-5, fused=dev.type == "cuda")

        def loss() -> torch.Tensor:
            return m(input_ids=ids, token_type_ids=tt, attention_mask=am, start_positions=sp, end_positions=ep).loss
    m.train()
    scaler = torch.amp.GradScaler(dev.type, enabled=amp)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.float16, enabled=amp):
            value = loss()
        scaler.scale(value).backward()
        scaler.step(opt)
        scaler.update()
    return step


def record(model: str, prec: str, batch: int, attention: str, out: str) -> dict:
    """Time and profile one configuration on the GPU; the measured.jsonl row."""
    from torch.profiler import ProfilerActivity, profile, schedule
    name = f"{model}_{prec}_b{batch}"
    step = build(model, prec, batch, attention, torch.device("cuda"))
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(TIMED):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=2)) as prof:
        for _ in range(4):
            step()
            prof.step()
    torch.cuda.synchronize()
    prof.export_chrome_trace(os.path.join(out, name + ".pt.trace.json.gz"))
    return dict(name=name, model=model, precision=prec, batch=batch, median_ms=round(statistics.median(times), 3),
                min_ms=round(min(times), 3), attention=attention if model != "resnet50" else "-",
                gpu=torch.cuda.get_device_name(), torch=torch.__version__)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated models (resnet50, bert_base_squad, bert_large_squad)")
    ap.add_argument("--attention", choices=("eager", "sdpa"), default="eager", help="BERT's attention (module doc)")
    ap.add_argument("--dry-run", action="store_true", help="CPU: one tiny step per model and precision")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    only = {x for x in a.only.split(",") if x}
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    for (model, prec), batches in RUNS.items():
        if only and model not in only:
            continue
        for batch in ([2] if a.dry_run else batches):
            name = f"{model}_{prec}_b{batch}"
            try:
                if a.dry_run:
                    build(model, prec, batch, a.attention, torch.device("cpu"), tiny=True)()
                    rec: dict = dict(name=name, status="ok")
                else:
                    rec = record(model, prec, batch, a.attention, a.out)
            except Exception as e:  # a batch that does not fit is a result (module doc), not the end of the run
                rec = dict(name=name, error=repr(e)[:300])
            print(json.dumps(rec), flush=True)
            with open(os.path.join(a.out, "smoke.jsonl" if a.dry_run else "measured.jsonl"), "a") as f:
                f.write(json.dumps(rec) + "\n")
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

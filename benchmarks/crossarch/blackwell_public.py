"""Public B200 figures against `habitat-trace compare` from our nearest H100 traces (issue 32, part 2).

    python benchmarks/crossarch/blackwell_public.py [--shared ../shared] [--bert-large TRACE] [--lambda DIR] [--no-write]

Each public figure is a B200-over-H100 speed-up per GPU; the prediction is the ratio of compare's GPU busy time on the
H100 (the origin row) and on the B200 (and GB200) from the trace named beside it. The traces are steps in bf16/TF32
where MLPerf's LLM runs use FP8 at scale, so each line compares a different step: the table says how far, not why.
The three MLPerf figures have two traces each: one at the benchmark model's width (two GPT-3 175B layers, d12288,
seq 2048, AdamW; two Llama 2 70B layers, d8192, seq 8192, base frozen as LoRA's backward; a UNet at SD v2's 320
channels on 64x64 latents), recorded on our H100 on 2026-12-06 by benchmarks/collect/collect_traces.py (their
un-profiled steps: benchmarks/results/mlperf_width_h100_measured.jsonl), and the small steps the table used before
(GPT-2 small, a d1024 LLaMA, a 128-channel UNet). ``--bert-large``: a BERT-large step (the 2x H100 run's one-GPU
bert_large_b8_s256_amp, not in ../shared).
``--lambda DIR``: collect_lambda.py's H100 recordings of Lambda's own steps (lambda_published.py --traces); each Lambda
figure then uses the step at the H100 row's batch on both GPUs, so per sample is per step.
Writes benchmarks/results/blackwell_public.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from habitat_trace import compare  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lambda_published import pick, published, recorded  # noqa: E402

LAMBDA = "Lambda, per sample"
MLPERF = "MLPerf Training v4.1, per GPU"
SOURCES = ("Lambda: lambdal/deeplearning-benchmark's 1-GPU rows, NGC pytorch 24.10 on both GPUs "
           "(../shared/data/lambda-published/published-dev.csv; per sample, each at its own batch). MLPerf Training v4.1: "
           "NVIDIA's per-GPU summary of its DGX B200 submissions against Hopper (November 2024, as reported by "
           "the-decoder.com and it-online.co.za: 2.2x Llama 2 70B LoRA, 2x GPT-3 175B, 1.7x Stable Diffusion v2; the "
           "LLM benchmarks in FP8).")
# (figure, published B200/H100 or a Lambda (model, precision) read from published-dev.csv, source, trace key)
FIGURES = (
    ("BERT-large SQuAD AMP", ("bert_large_squad", "amp"), LAMBDA, "bert_large"),
    ("BERT-base SQuAD AMP", ("bert_base_squad", "amp"), LAMBDA, "bert"),
    ("ResNet50 AMP", ("resnet50", "amp"), LAMBDA, "resnet50"),
    ("BERT-large SQuAD TF32", ("bert_large_squad", "tf32"), LAMBDA, "tf32_mlp"),
    ("BERT-base SQuAD TF32", ("bert_base_squad", "tf32"), LAMBDA, "lambda only"),
    ("ResNet50 TF32", ("resnet50", "tf32"), LAMBDA, "lambda only"),
    ("GPT-3 175B pretraining", 2.0, MLPERF, "gpt3"),
    ("GPT-3 175B pretraining", 2.0, MLPERF, "gpt2"),
    ("Llama 2 70B LoRA fine-tuning", 2.2, MLPERF, "llama70b"),
    ("Llama 2 70B LoRA fine-tuning", 2.2, MLPERF, "llama"),
    ("Stable Diffusion v2", 1.7, MLPERF, "unet_sd"),
    ("Stable Diffusion v2", 1.7, MLPERF, "unet"),
)
TRACES = {
    "bert": ("BERT-like b32 s128 bf16", "{shared}/data/traces/h100-sxm/bert_b32_s128_amp.pt.trace.json.gz"),
    "resnet50": ("ResNet-50 b64 bf16 channels-last", "{shared}/data/traces/h100-sxm/resnet50_b64_amp.pt.trace.json.gz"),
    "gpt2": ("GPT-2 small b8 s1024 bf16", "{shared}/data/traces/h100-sxm/gpt2_b8_s1024_amp.pt.trace.json.gz"),
    # the MLPerf LLM steps at their own width, two layers of each (benchmarks/collect/workloads.py, 2026-12-06)
    "gpt3": ("2 GPT-3 175B-wide layers (d12288) b1 s2048 bf16, AdamW",
             "{root}/benchmarks/traces/h100-sxm/gpt3_layers_d12288_l2_b1_s2048_bf16.pt.trace.json.gz"),
    "llama70b": ("2 Llama 2 70B-wide layers (d8192) b1 s8192 bf16, base frozen",
                 "{root}/benchmarks/traces/h100-sxm/llama70b_lora_layers_d8192_l2_b1_s8192_bf16.pt.trace.json.gz"),
    "llama": ("LLaMA-style d1024 l8 b4 s1024 bf16",
              "{root}/benchmarks/traces/h100-sxm/llama_d1024_l8_b4_s1024_bf16.pt.trace.json.gz"),
    "unet": ("diffusion UNet c128 b16 64px AMP", "{root}/benchmarks/traces/h100-sxm/unet_c128_b16_64px_amp.pt.trace.json.gz"),
    "unet_sd": ("SD v2-wide UNet c320 (1,2,4,4) b8 64px latents AMP",
                "{root}/benchmarks/traces/h100-sxm/unet_sd_c320_b8_64px_amp.pt.trace.json.gz"),
    "tf32_mlp": ("TF32 MLP w4096 b8192", "{root}/benchmarks/traces/h100-sxm/tf32_mlp_w4096_b8192.pt.trace.json.gz"),
}


def speedups(path: Path) -> dict[str, float]:
    t = compare(path, to=["B200", "GB200"]).set_index("gpu")["gpu_busy_ms"]
    return {g: float(t.iat[0] / t[g]) for g in ("B200", "GB200")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--bert-large", type=Path, help="an H100 BERT-large training step trace")
    ap.add_argument("--lambda", dest="lambda_dir", type=Path, help="collect_lambda.py's output folder (H100)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    traces = {k: (label, Path(p.format(shared=a.shared, root=ROOT))) for k, (label, p) in TRACES.items()}
    if a.bert_large is not None:
        traces["bert_large"] = ("BERT-large b8 s256 bf16", a.bert_large)
    out = ["| public figure | source | published | our nearest trace | predicted B200 | error | predicted GB200 |",
           "|---|---|---:|---|---:|---:|---:|"]
    cache: dict[str, dict[str, float]] = {}
    lam = published(a.shared)
    lam = lam[lam["gpu"] == "B200 192GB"].set_index(["model", "precision"])
    runs = recorded(a.lambda_dir) if a.lambda_dir is not None else None
    for figure, pub, source, key in FIGURES:
        if isinstance(pub, tuple):
            row = lam.loc[pub]
            figure += f" (b{row['batch']:g} vs b{row['h100_batch']:g})"
            if runs is not None and (run := pick(runs, *pub, row["h100_batch"])) is not None:
                key = f"lambda {pub[0]} {pub[1]} b{run['batch']}"
                traces[key] = (f"Lambda's step on our H100, b{run['batch']}", run["trace"])
            pub = float(row["throughput"] / row["h100_throughput"])
        if key not in traces:
            out.append(f"| {figure} | {source} | {pub:.2f}x | (no trace: --bert-large or --lambda) | - | - | - |")
            continue
        label, path = traces[key]
        cache.setdefault(key, speedups(path))
        s = cache[key]
        out.append(f"| {figure} | {source} | {pub:.2f}x | {label} | {s['B200']:.2f}x | "
                   f"{100 * (s['B200'] / pub - 1):+.0f}% | {s['GB200']:.2f}x |")
    text = ("# Public B200 figures vs compare from our nearest H100 traces (benchmarks/crossarch/blackwell_public.py)\n\n"
            "Speed-up = H100 GPU busy time / B200 GPU busy time; error = predicted / published - 1.\n\n"
            + "\n".join(out) + "\n\n" + SOURCES + "\n")
    print(text)
    if not a.no_write:
        (a.out / "blackwell_public.md").write_text(text)


if __name__ == "__main__":
    main()

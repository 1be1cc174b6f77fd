"""Convolution and attention microbenchmark for the learned kernel models (issue 6). Run on a GPU machine:

    python benchmarks/collect/conv_attn_microbench.py --out DIR [--sms N] [--budget-s 200] [--dtypes fp32,bf16,fp16]

Times conv2d forward, its input gradient and its weight gradient (``aten::convolution_backward`` with one output
each), and scaled-dot-product attention forward and forward+backward, with CUDA events (median of repeats after
warm-up), and profiles one call for the kernel names and grids. Writes DIR/convattn_<gpu>[_smN].csv: one row per
(op, dtype, shape) with ``Latency`` [ms], the main kernel (largest grid), every kernel name, ``FLOPs`` of the op and
``SMs``. ``--sms N`` runs on a stream of a green context of N SMs, as gemm_microbench.py and the shared collector.
Shapes come from real models (ResNet, VGG, UNet, DCGAN convolutions; GPT-2/LLaMA/BERT/ViT attention) plus a seeded
random sample; the order is shuffled so a budget cut leaves an unbiased sample. fp32 convolutions run with cuDNN's
default TF32 allowed (as in training); fp32 attention uses the math/efficient backends PyTorch picks.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_microbench import kernels, time_ms  # noqa: E402

T0 = time.time()
COLUMNS = ["OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name", "Grid x", "Grid y",
           "Grid z", "Block x", "Block y", "Block z", "CUDA Version", "Kernels", "N", "C", "H", "W", "K", "R", "S",
           "Stride", "Pad", "Heads", "SeqQ", "SeqK", "HeadDim", "Causal", "FLOPs", "DType", "SMs", "Repeats",
           "ChannelsLast"]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def conv_shapes() -> list[dict]:
    """(batch N, in C, H=W, out K, kernel R=S, stride, pad) of layers in ResNet-50, VGG-16, a UNet and DCGAN."""
    layers = [(64, 56, 64, 1, 1, 0), (64, 56, 64, 3, 1, 1), (64, 56, 256, 1, 1, 0), (256, 56, 128, 1, 1, 0),
              (128, 28, 128, 3, 1, 1), (128, 28, 512, 1, 1, 0), (512, 28, 256, 1, 1, 0), (256, 14, 256, 3, 1, 1),
              (256, 14, 1024, 1, 1, 0), (1024, 14, 512, 1, 1, 0), (512, 7, 512, 3, 1, 1), (512, 7, 2048, 1, 1, 0),
              (3, 224, 64, 7, 2, 3), (64, 224, 64, 3, 1, 1), (128, 112, 128, 3, 1, 1), (256, 56, 256, 3, 1, 1),
              (512, 28, 512, 3, 1, 1), (512, 14, 512, 3, 1, 1), (128, 64, 128, 3, 1, 1), (256, 32, 256, 3, 1, 1),
              (512, 16, 512, 3, 1, 1), (4, 64, 128, 3, 1, 1), (3, 64, 64, 4, 2, 1), (64, 32, 128, 4, 2, 1),
              (128, 16, 256, 4, 2, 1), (256, 8, 512, 4, 2, 1)]
    return [dict(N=n, C=c, H=hw, K=k, R=r, stride=s, pad=p) for c, hw, k, r, s, p in layers for n in (16, 64)]


def attn_shapes() -> list[dict]:
    """(batch, heads, seq q, seq k, head dim, causal) of GPT-2, BERT, LLaMA and ViT layers."""
    out = []
    for b, h, s, d, causal in ((8, 12, 1024, 64, True), (32, 12, 128, 64, False), (4, 16, 1024, 64, True),
                               (4, 32, 2048, 128, True), (16, 16, 197, 64, False), (8, 12, 512, 64, True),
                               (2, 32, 4096, 128, True), (16, 8, 256, 128, False), (1, 16, 8192, 64, True)):
        out.append(dict(B=b, heads=h, sq=s, sk=s, d=d, causal=causal))
    return out


def random_shapes(n: int, seed: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    convs, attns = [], []
    for _ in range(n):
        c, k = (int(2 ** rng.uniform(4, 10)) // 8 * 8 or 8 for _ in range(2))
        r = rng.choice((1, 3, 3, 5))
        convs.append(dict(N=rng.choice((8, 16, 32, 64)), C=c, H=rng.choice((7, 14, 28, 56, 112)), K=k, R=r,
                          stride=rng.choice((1, 1, 2)), pad=r // 2))
        s = int(2 ** rng.uniform(7, 12.5))
        attns.append(dict(B=rng.choice((1, 2, 4, 8, 16)), heads=rng.choice((8, 12, 16, 32)), sq=s, sk=s,
                          d=rng.choice((64, 128)), causal=rng.random() < 0.5))
    return convs, attns


def conv_calls(sh: dict, dt: torch.dtype, channels_last: bool) -> dict:
    mf = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(sh["N"], sh["C"], sh["H"], sh["H"], device="cuda", dtype=dt).to(memory_format=mf)
    w = torch.randn(sh["K"], sh["C"], sh["R"], sh["R"], device="cuda", dtype=dt).to(memory_format=mf)
    y = F.conv2d(x, w, stride=sh["stride"], padding=sh["pad"])
    gy = torch.randn_like(y)
    common = dict(bias_sizes=None, stride=[sh["stride"]] * 2, padding=[sh["pad"]] * 2, dilation=[1, 1],
                  transposed=False, output_padding=[0, 0], groups=1)
    bwd = torch.ops.aten.convolution_backward
    flops = 2.0 * y.numel() * sh["C"] * sh["R"] * sh["R"]
    return {"conv2d_fwd": (lambda: F.conv2d(x, w, stride=sh["stride"], padding=sh["pad"]), flops),
            "conv2d_bwd_input": (lambda: bwd(gy, x, w, output_mask=[True, False, False], **common), flops),
            "conv2d_bwd_weight": (lambda: bwd(gy, x, w, output_mask=[False, True, False], **common), flops)}


def attn_calls(sh: dict, dt: torch.dtype) -> dict:
    q, k, v = (torch.randn(sh["B"], sh["heads"], s, sh["d"], device="cuda", dtype=dt, requires_grad=True)
               for s in (sh["sq"], sh["sk"], sh["sk"]))
    flops = 4.0 * sh["B"] * sh["heads"] * sh["sq"] * sh["sk"] * sh["d"] * (0.5 if sh["causal"] else 1.0)
    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=sh["causal"])  # noqa: E731
    out = fwd()
    go = torch.randn_like(out)

    def fwd_bwd():
        torch.autograd.grad(fwd(), (q, k, v), go)
    return {"sdpa_fwd": (fwd, flops), "sdpa_fwd_bwd": (fwd_bwd, 3.5 * flops)}  # bwd: 2.5x the forward FLOPs


def row(op, dtype, sh, flops, t_ms, ks, info, sms, repeats, cl) -> dict:
    main = max(ks, key=lambda x: x["grid"][0] * x["grid"][1] * x["grid"][2]) if ks else \
        {"name": "", "grid": (0, 0, 0), "block": (0, 0, 0)}
    return {"OPName": op, "Latency": t_ms, "Device": info["name"], "Torch Version": torch.__version__,
            "CUDNN Version": info["cudnn"], "Kernel Name": main["name"], "Grid x": main["grid"][0],
            "Grid y": main["grid"][1], "Grid z": main["grid"][2], "Block x": main["block"][0],
            "Block y": main["block"][1], "Block z": main["block"][2], "CUDA Version": torch.version.cuda,
            "Kernels": "".join(";" + x["name"] for x in ks), "N": sh.get("N", sh.get("B")), "C": sh.get("C", ""),
            "H": sh.get("H", ""), "W": sh.get("H", ""), "K": sh.get("K", ""), "R": sh.get("R", ""),
            "S": sh.get("R", ""), "Stride": sh.get("stride", ""), "Pad": sh.get("pad", ""),
            "Heads": sh.get("heads", ""), "SeqQ": sh.get("sq", ""), "SeqK": sh.get("sk", ""),
            "HeadDim": sh.get("d", ""), "Causal": sh.get("causal", ""), "FLOPs": flops, "DType": dtype,
            "SMs": sms, "Repeats": repeats, "ChannelsLast": cl}


def work(a) -> list[tuple]:
    convs, attns = random_shapes(a.random, a.seed)
    items = [("conv", sh, dt, cl) for sh in conv_shapes() + convs for dt in a.dtypes.split(",")
             for cl in ((False, True) if dt != "fp32" else (False,))]
    items += [("attn", sh, dt, False) for sh in attn_shapes() + attns for dt in a.dtypes.split(",")]
    random.Random(a.seed).shuffle(items)
    return items


def green_stream(sms: int):
    from torch.cuda import green_contexts as gcm
    torch.zeros(1, device="cuda")
    gc = gcm.GreenContext.create(sms, 0) if hasattr(gcm.GreenContext, "create") else gcm.GreenContext(num_sms=sms)
    return gc, torch.cuda.stream(gc.Stream())  # keep gc referenced: its stream dies with it


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sms", type=int, default=0)
    ap.add_argument("--budget-s", type=float, default=200)
    ap.add_argument("--dtypes", default="fp32,bf16,fp16")
    ap.add_argument("--random", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    gc = None
    if a.sms:
        gc, ctx = green_stream(a.sms)
        ctx.__enter__()
    os.makedirs(a.out, exist_ok=True)
    p = torch.cuda.get_device_properties(0)
    info = dict(name=p.name, sms=p.multi_processor_count, cudnn=torch.backends.cudnn.version())
    torch.backends.cudnn.benchmark = True  # as training scripts do: cuDNN picks its fastest kernel per shape
    path = os.path.join(a.out, f"convattn_{p.name.replace(' ', '_')}{'_sm%d' % a.sms if a.sms else ''}.csv")
    done = 0
    with open(path, "w", newline="") as fh:
        out = csv.DictWriter(fh, COLUMNS)
        out.writeheader()
        for kind, sh, dtype, cl in work(a):
            if time.time() - T0 > a.budget_s:
                print(f"budget spent after {done} rows", flush=True)
                break
            try:
                calls = conv_calls(sh, DTYPES[dtype], cl) if kind == "conv" else attn_calls(sh, DTYPES[dtype])
                for op, (call, flops) in calls.items():
                    t_ms = time_ms(call, a.repeats)
                    out.writerow(row(op, dtype, sh, flops, t_ms, kernels(call), info, a.sms or info["sms"],
                                     a.repeats, cl))
                    done += 1
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
            except RuntimeError as exc:
                print(f"skip {kind} {dtype} {sh}: {str(exc).splitlines()[0]}", flush=True)
            fh.flush()
    print(f"wrote {done} rows to {path} in {time.time() - T0:.0f} s (green context {gc is not None})", flush=True)


if __name__ == "__main__":
    main()

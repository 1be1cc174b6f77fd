"""Re-time the GEMM and conv/attention microbenchmark shapes without the host in the measurement. Run on a GPU:

    python benchmarks/collect/queued_retime.py --out DIR [--gemm-budget-s 330] [--budget-s 560]

gemm_microbench.py and conv_attn_microbench.py time one call between two CUDA events with a sync after each, so a
kernel shorter than the host's launch path (Python, dispatcher, driver) is timed as the launch path: their smallest
rows read 23-26 µs, and two hosts' rows below 0.1 ms compare their CPUs (median H200/H100 ratio of GEMMs of
0.05-0.1 ms: 0.77; of conv gradients under 0.05 ms: 1.5). Here the stream is first held by a spin kernel
(``torch.cuda._sleep``, twice the host's measured enqueue time) so the events bracket n back-to-back calls and the
time per call is the GPU's alone, as in a GPU-bound training step. n = ceil(1 ms / event time), 1..40; median of 3.

Reads the rows of benchmarks/results/{gemm,convattn}/<kind>_<gpu>.csv.gz for this GPU (full SMs) and writes
DIR/q_<kind>_<gpu>.csv: the same columns plus ``Q`` (queued ms per call). The runs of 2026-11-23 (H100 SXM, H200;
results in benchmarks/results/queued/) used a condensed copy of this code sent inline, because the device tool ships
the session's main checkout rather than this worktree; the logic and constants are these.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conv_attn_microbench as ca  # noqa: E402
import gemm_microbench as gm  # noqa: E402

T0 = time.time()
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results")
WINDOW_MS = 1.0  # GPU time per timing: event resolution (~0.5 µs) is then noise
MAX_CALLS = 40
REPEATS = 3
CYCLES_PER_MS = 2e6  # spin length in SM clocks: ~2 GHz on an H100/H200 (1980 MHz boost)
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def queued_ms(call, events_ms: float) -> float:
    """GPU time per call of n calls enqueued behind a spin kernel (median of REPEATS)."""
    for _ in range(2):
        call()
    torch.cuda.synchronize()
    n = int(min(MAX_CALLS, max(1, math.ceil(WINDOW_MS / max(events_ms, 1e-3)))))
    torch.cuda._sleep(int(2 * CYCLES_PER_MS))  # hold the GPU while the host enqueue time is measured
    t = time.perf_counter()
    for _ in range(3):
        call()
    host_ms = (time.perf_counter() - t) / 3 * 1e3
    torch.cuda.synchronize()
    cycles = int(CYCLES_PER_MS * (2 * n * host_ms + 0.2))
    out = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        start.record()
        for _ in range(n):
            call()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / n)
    return statistics.median(out)


def gemm_call(r: dict):
    torch.backends.cuda.matmul.allow_tf32 = r["DType"] == "tf32"
    return gm.make_call(r["OPName"], r["DType"], *[int(r[k]) for k in "BMNK"])


def convattn_call(r: dict):
    f = lambda k: int(float(r[k]))  # noqa: E731
    dt, op = TORCH_DTYPES[r["DType"]], r["OPName"]
    if op.startswith("conv"):
        sh = dict(N=f("N"), C=f("C"), H=f("H"), K=f("K"), R=f("R"), stride=f("Stride"), pad=f("Pad"))
        return ca.conv_calls(sh, dt, r["ChannelsLast"] == "True")[op][0]
    sh = dict(B=f("N"), heads=f("Heads"), sq=f("SeqQ"), sk=f("SeqK"), d=f("HeadDim"), causal=r["Causal"] == "True")
    return ca.attn_calls(sh, dt)[op][0]


def run(kind: str, make, out_dir: str, budget_s: float) -> None:
    name = torch.cuda.get_device_properties(0).name.replace(" ", "_")
    rows = list(csv.DictReader(gzip.open(os.path.join(RESULTS, kind, f"{kind}_{name}.csv.gz"), "rt")))
    done = 0
    with open(os.path.join(out_dir, f"q_{kind}_{name}.csv"), "w", newline="") as fh:
        out = csv.DictWriter(fh, list(rows[0]) + ["Q"])
        out.writeheader()
        for r in rows:
            if time.time() - T0 > budget_s:
                break
            try:
                r["Q"] = queued_ms(make(r), float(r["Latency"]))
            except (torch.OutOfMemoryError, RuntimeError) as exc:  # unsupported shape/dtype on this GPU
                print("skip", str(exc)[:80], flush=True)
                torch.cuda.empty_cache()
                continue
            out.writerow(r)
            done += 1
    print(kind, done, len(rows), f"{time.time() - T0:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--gemm-budget-s", type=float, default=330, help="stop GEMM rows after this many seconds")
    ap.add_argument("--budget-s", type=float, default=560, help="stop conv/attention rows after this many seconds")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    run("gemm", gemm_call, a.out, a.gemm_budget_s)
    run("convattn", convattn_call, a.out, a.budget_s)


if __name__ == "__main__":
    main()

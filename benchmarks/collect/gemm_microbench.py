"""GEMM / bmm / linear microbenchmark for the learned kernel model (issue 6). Run on a GPU machine:

    python benchmarks/collect/gemm_microbench.py --out DIR [--sms N] [--budget-s 220] [--dtypes fp32,tf32,bf16,fp16,fp8]
                                                 [--shapes CSV]

Times each (op, dtype, B, M, N, K) with CUDA events (median of repeats after warm-up), and profiles one call with
torch.profiler for the kernel names and grids/blocks. Writes DIR/gemm_<gpu>[_smN].csv in the NeuSight column
layout (OPName, Latency [ms], Device, ..., B, M, N, K) plus DType and SMs, and DIR/device.json. ``--sms N`` runs
inside a green context of N SMs exactly as ../shared/tools/collect_traces.py does. Shapes come from real models
(GPT-2/LLaMA/BERT projections and MLPs, attention bmm, ResNet-style im2col GEMMs) at several token counts, plus a
seeded log-uniform sample; the run stops when ``--budget-s`` is spent (default keeps it under ~4 minutes).
``--shapes CSV`` (columns op, b, m, n, k) times those shapes instead, in file order: NeuSight's public FP32 shapes
(benchmarks/crossarch/neusight_shapes.csv) give their per-kernel set a GPU it does not have (issue 32).
``--neusight`` times them as NeuSight's collector did (neusight/Dataset/collect.py, ``profile_kernel``), so the
latencies compare with its public CSVs shape for shape: its (B, M, N, K) are ``bmm(randn(B, M, N), randn(B, N, K))``
and ``nn.Linear(N, K, bias=True)`` on ``randn(B, M, N)`` (output M x K, N the reduction: not this script's own
order, where N is the output's columns and K the reduction), under ``torch.no_grad``, each the mean of the 5 fastest
of 25 calls timed one by one between CUDA events (``measure_once``); the CSV keeps NeuSight's B, M, N, K, and adds
``Kernel Time``: the GPU's own time of a call (its kernels' summed durations in a profile, the median of 5 calls),
which holds none of the host path a one-call latency holds.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import event_times_ms  # noqa: E402

T0 = time.time()
COLUMNS = ["OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name", "Warps per SM",
           "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z", "CUDA Version", "Kernels",
           "B", "M", "N", "K", "DType", "SMs", "Repeats", "Kernel Time"]
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
          "fp8": getattr(torch, "float8_e4m3fn", None)}
# (d_model, d_ff, heads) of models whose GEMMs dominate training/inference traces
MODELS = [(768, 3072, 12), (1024, 4096, 16), (2048, 8192, 16), (4096, 11008, 32), (4096, 14336, 32),
          (5120, 13824, 40), (8192, 28672, 64)]
TOKENS = [128, 512, 2048, 8192]
PROFILED_CALLS = 5  # --neusight: calls profiled for the kernel time (kernel_time_ms)


def model_shapes() -> list[tuple[str, int, int, int, int]]:
    """(op, B, M, N, K): linear = [M, K] x [N, K]^T, bmm = B x [M, K] x [K, N]."""
    out = []
    for d, ff, h in MODELS:
        for t in TOKENS:
            out += [("linear", 1, t, 3 * d, d), ("linear", 1, t, d, d), ("linear", 1, t, ff, d),
                    ("linear", 1, t, d, ff)]
            for seq in (512, 2048):
                if t % seq == 0 or t == seq:
                    b = max(t // seq, 1) * h
                    out += [("bmm", b, seq, seq, d // h), ("bmm", b, seq, d // h, seq)]
    for c_in, c_out, hw in ((64, 64, 56), (128, 128, 28), (256, 256, 14), (512, 512, 7)):
        for bs in (32, 128):  # conv 3x3 as im2col GEMM: [N*H*W, C*9] x [C*9, O]
            out.append(("linear", 1, bs * hw * hw, c_out, c_in * 9))
    return out


def random_shapes(n: int, seed: int) -> list[tuple[str, int, int, int, int]]:
    rng = random.Random(seed)
    dim = lambda lo, hi: int(round(2 ** rng.uniform(lo, hi)))  # noqa: E731
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            out.append(("linear", 1, dim(4, 14), dim(4, 14), dim(4, 14)))
        else:
            out.append(("bmm", dim(0, 9), dim(4, 12), dim(4, 12), dim(4, 12)))
    return out


def make_call(op: str, dtype: str, b: int, m: int, n: int, k: int):
    dev = "cuda"
    if dtype == "fp8":
        a = torch.randn(m, k, device=dev).to(DTYPES["fp8"])
        w = torch.randn(n, k, device=dev).to(DTYPES["fp8"])
        one = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dt = DTYPES[dtype]
    if op == "linear":
        x, w = torch.randn(m, k, device=dev, dtype=dt), torch.randn(n, k, device=dev, dtype=dt)
        return lambda: torch.nn.functional.linear(x, w)
    x, y = torch.randn(b, m, k, device=dev, dtype=dt), torch.randn(b, k, n, device=dev, dtype=dt)
    return lambda: torch.bmm(x, y)


def neusight_call(op: str, b: int, m: int, n: int, k: int, device: str = "cuda"):
    """NeuSight's FP32 op for its (B, M, N, K) (module doc, ``--neusight``): output (B, M, K), N the reduction."""
    x = torch.randn(b, m, n, device=device)
    if op == "bmm":
        y = torch.randn(b, n, k, device=device)
        return lambda: torch.bmm(x, y)
    lin = torch.nn.Linear(n, k, bias=True, device=device)
    return lambda: lin(x)


def neusight_time_ms(call, active: int = 25, sample: int = 5) -> float:
    """NeuSight's estimator: ``active`` calls timed one by one, the mean of the ``sample`` fastest (module doc)."""
    fastest = sorted(event_times_ms(call, active))[:sample]
    return sum(fastest) / len(fastest)


def time_ms(call, repeats: int) -> float:
    for _ in range(3):
        call()
    return statistics.median(event_times_ms(call, repeats))


def kernels(call, calls: int = 1) -> list[dict]:
    """Name, grid, block and duration (us) of each GPU kernel of ``calls`` calls (in order), from the Kineto trace
    torch.profiler exports (FunctionEvent has no grid; the chrome trace's kernel events carry args.grid and
    args.block)."""
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
            torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        prof.export_chrome_trace(tmp.name)
        with open(tmp.name) as fh:
            events = json.load(fh).get("traceEvents", [])
    return [{"name": e["name"], "grid": tuple(e.get("args", {}).get("grid", (0, 0, 0))),
             "block": tuple(e.get("args", {}).get("block", (0, 0, 0))), "dur": float(e.get("dur", 0.0))}
            for e in sorted(events, key=lambda e: e.get("ts", 0)) if e.get("cat") == "kernel"]


def kernel_time_ms(ks: list[dict], calls: int) -> float:
    """The median over ``calls`` profiled calls of one call's summed kernel durations (``kernels(call, calls)``): the
    GPU's time alone, without the host's dispatch and launch path that a one-call latency between CUDA events holds
    (which drifted between ~29 and ~45 us for a near-empty bmm over one run on our H100, 2026-12-06)."""
    per = len(ks) // calls
    if per == 0 or per * calls != len(ks):
        return float("nan")
    return statistics.median(sum(k["dur"] for k in ks[i * per:(i + 1) * per]) for i in range(calls)) / 1e3


def row(op, dtype, b, m, n, k, t_ms, ks, info, sms, repeats, kernel_ms=float("nan")) -> dict:
    main = max(ks, key=lambda x: x["grid"][0] * x["grid"][1] * x["grid"][2]) if ks else \
        {"name": "", "grid": (0, 0, 0), "block": (0, 0, 0)}
    return {"OPName": op, "Latency": t_ms, "Device": info["name"], "Torch Version": torch.__version__,
            "CUDNN Version": info["cudnn"], "Kernel Name": main["name"], "Warps per SM": "", "Blocks per SM": "",
            "Grid x": main["grid"][0], "Grid y": main["grid"][1], "Grid z": main["grid"][2],
            "Block x": main["block"][0], "Block y": main["block"][1], "Block z": main["block"][2],
            "CUDA Version": torch.version.cuda, "Kernels": "".join(";" + x["name"] for x in ks),
            "B": b, "M": m, "N": n, "K": k, "DType": dtype, "SMs": sms, "Repeats": repeats, "Kernel Time": kernel_ms}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sms", type=int, default=0, help="run inside a green context limited to this many SMs")
    ap.add_argument("--budget-s", type=float, default=220, help="stop starting new shapes after this many seconds")
    ap.add_argument("--dtypes", default="fp32,tf32,bf16,fp16,fp8")
    ap.add_argument("--random", type=int, default=400, help="extra log-uniform shapes")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shapes", help="CSV of op,b,m,n,k to time instead of the built-in shapes")
    ap.add_argument("--neusight", action="store_true",
                    help="with --shapes: NeuSight's ops, dimension order and estimator, FP32 only (module doc)")
    a = ap.parse_args()
    if a.neusight:
        a.dtypes, a.repeats = "fp32", 25
    stream_ctx = None
    if a.sms:
        from torch.cuda import green_contexts as gcm
        torch.cuda.init(); torch.zeros(1, device="cuda")
        gc = gcm.GreenContext.create(a.sms, 0) if hasattr(gcm.GreenContext, "create") else gcm.GreenContext(num_sms=a.sms)
        stream_ctx = torch.cuda.stream(gc.Stream())
        print("green context", a.sms, flush=True)
    if stream_ctx is not None:
        stream_ctx.__enter__()
    os.makedirs(a.out, exist_ok=True)
    p = torch.cuda.get_device_properties(0)
    info = dict(name=p.name, sms=p.multi_processor_count, cc=f"{p.major}.{p.minor}", torch=torch.__version__,
                cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    with open(os.path.join(a.out, "device.json"), "w") as f:
        json.dump(info, f)
    dtypes = [d for d in a.dtypes.split(",") if d]
    if "fp8" in dtypes and (DTYPES["fp8"] is None or not hasattr(torch, "_scaled_mm") or p.major < 9):
        dtypes.remove("fp8")
    if a.shapes:
        with open(a.shapes) as fh:
            shapes = [(r["op"], int(r["b"]), int(r["m"]), int(r["n"]), int(r["k"])) for r in csv.DictReader(fh)]
    else:
        shapes = model_shapes() + random_shapes(a.random, a.seed)
        random.Random(a.seed).shuffle(shapes)  # so a budget cut leaves an unbiased sample
    suffix = (f"_sm{a.sms}" if a.sms else "") + ("_neusight" if a.neusight else "")
    path = os.path.join(a.out, f"gemm_{p.name.replace(' ', '_')}{suffix}.csv")
    done = 0
    with open(path, "w", newline="") as fh:
        out = csv.DictWriter(fh, COLUMNS)
        out.writeheader()
        for op, b, m, n, k in shapes:
            if time.time() - T0 > a.budget_s:
                print(f"budget spent after {done} rows", flush=True)
                break
            for dtype in dtypes:
                if dtype == "fp8" and (op != "linear" or m % 16 or n % 16 or k % 16):
                    continue  # _scaled_mm: 2-D only, dims multiple of 16
                torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
                try:
                    kernel_ms = float("nan")
                    if a.neusight:
                        call = neusight_call(op, b, m, n, k)
                        with torch.no_grad():
                            t_ms, ks = neusight_time_ms(call), kernels(call, PROFILED_CALLS)
                        kernel_ms, ks = kernel_time_ms(ks, PROFILED_CALLS), ks[:len(ks) // PROFILED_CALLS]
                    else:
                        call = make_call(op, dtype, b, m, n, k)
                        t_ms, ks = time_ms(call, a.repeats), kernels(call)
                except torch.OutOfMemoryError:
                    torch.cuda.empty_cache()
                    continue
                except RuntimeError as exc:  # unsupported dtype/shape combination on this GPU
                    print(f"skip {op} {dtype} {b}x{m}x{n}x{k}: {str(exc).splitlines()[0]}", flush=True)
                    continue
                out.writerow(row(op, dtype, b, m, n, k, t_ms, ks, info, a.sms or info["sms"], a.repeats, kernel_ms))
                done += 1
            fh.flush()
    print(f"wrote {done} rows to {path} in {time.time() - T0:.0f} s", flush=True)


if __name__ == "__main__":
    main()

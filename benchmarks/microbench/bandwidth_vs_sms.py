"""Achievable DRAM bandwidth and compute rate versus the number of SMs a kernel can use.

Run on a GPU machine (the `device` tool):  python3 benchmarks/microbench/bandwidth_vs_sms.py --out results.json
SM limits use CUDA green contexts (torch.cuda.green_contexts), as the shared ground truth did.
Measures, per SM count: device-to-device copy (bytes read + written), a 3-operand elementwise add,
an fp32 FMA-bound Triton kernel, and bf16/fp32 matmul; and, on the whole GPU, copy bandwidth versus
the number of thread blocks of a grid-stride Triton copy (the per-block latency-bound regime).
Each figure is the median of CUDA-event timings after warm-up.
"""
import argparse, json, statistics, time

import torch
import triton
import triton.language as tl


def timed(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


@triton.jit
def fma_kernel(x, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    a = v
    for _ in range(ITERS):
        a = a * 0.999 + 0.001
    tl.store(x + offs, a, mask=offs < n)


def measure(label):
    n = 1 << 28  # 1 GiB fp32
    a = torch.randn(n, device="cuda"); b = torch.randn(n, device="cuda"); c = torch.empty_like(a)
    out = {"label": label}
    out["copy_gbs"] = 2 * 4 * n / timed(lambda: c.copy_(a)) / 1e6
    out["add_gbs"] = 3 * 4 * n / timed(lambda: torch.add(a, b, out=c)) / 1e6
    m = 1 << 22
    x = torch.randn(m, device="cuda")
    iters = 4096
    ms = timed(lambda: fma_kernel[(m // 256,)](x, m, ITERS=iters, BLOCK=256))
    out["fma_tflops"] = 2 * m * iters / ms / 1e9
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float32, "fp32")):
        k = 8192 if dt == torch.bfloat16 else 4096
        p = torch.randn(k, k, device="cuda", dtype=dt); q = torch.randn(k, k, device="cuda", dtype=dt)
        torch.backends.cuda.matmul.allow_tf32 = False
        out[f"mm_{name}_tflops"] = 2 * k**3 / timed(lambda: p @ q, reps=10) / 1e9
    del a, b, c, x
    torch.cuda.empty_cache()
    return out


def blocks_sweep():
    n = 1 << 28
    a = torch.randn(n, device="cuda"); c = torch.empty_like(a)
    rows = []
    for g in (1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2112, 4224):
        for blk in (256, 1024):
            ms = timed(lambda: copy_kernel[(g,)](a, c, n, BLOCK=blk), reps=5, warm=2)
            rows.append({"grid": g, "block_elems": blk, "copy_gbs": 8 * n / ms / 1e6})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sms", default="8,16,32,48,64,100,132")
    a = ap.parse_args()
    from torch.cuda import green_contexts as gcm
    p = torch.cuda.get_device_properties(0)
    res = {"gpu": p.name, "sms": p.multi_processor_count, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "by_sms": [], "by_blocks": []}
    res["by_blocks"] = blocks_sweep()
    print(json.dumps(res["by_blocks"]), flush=True)
    for s in [int(x) for x in a.sms.split(",")]:
        if s >= p.multi_processor_count:
            r = measure(s)
        else:
            gc = gcm.GreenContext.create(s, 0)
            with torch.cuda.stream(gc.Stream()):
                r = measure(s)
        r["sms"] = s
        res["by_sms"].append(r)
        print(json.dumps(r), flush=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

"""Held-out launch-bound ground truth for issue 35: steps the host sets, recorded the ways users record them.

Workloads (launch_workloads.py) that none of the overhead calibration, the dev sets or the earlier held-out sets
hold: the issue's 4 x 4096 MLP in bf16 (batch 512), small MLPs, decode-style loops, CPU-heavy optimizers, Hugging
Face and timm models at small batches. Per workload:

- with ``--cold``, first-time users' recordings (first_user_trace): the model that never ran, profiled from its first
  step without warm-up (``cold``), and after warm-up one step inside a plain ``profile()`` (``single``);
- after warm-up, the un-profiled loop (CUDA-event median/p10/p90 and back-to-back steady wall time,
  collect_traces.py's), then one torch.profiler trace per recording option (VARIANTS: record_shapes and with_stack
  on and off, collect_traces.PROFILE_SCHEDULE as a user writes it), each followed by the steady wall time again
  (``after_ms``: the host's pace a little later), and the loop once more at the end (``post_*``);
- the same loop inside green contexts of TARGET_SMS SMs (un-profiled timing and one record_shapes trace): the
  same-host targets a user's measured step is checked against.

One ground_truth.jsonl line per trace (summarize.py's columns; ``workload`` carries the variant), device.json,
the traces. ``--tar`` packs them into parts of at most 15 MiB (the device's file limit).

    python benchmarks/collect/launch_bound.py --out DIR [--set A|B] [--cold] [--only a,b] [--budget-s 400] [--tar]
    python benchmarks/collect/launch_bound.py --dry-run --set B --out /tmp/lb      # CPU, tiny sizes, no profiler
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tarfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from collect_traces import (device_info, green_stream, gzip_to, profile_to_gzip, quantile, run_dry,  # noqa: E402
                            run_each, seed_all, selected, steady_wall_ms)
from launch_workloads import SETS  # noqa: E402
from timing import event_times_ms  # noqa: E402
from workloads import Workload  # noqa: E402

WARMUP_ITERS = 5
# Recording options (issue 35: with and without record_shapes / with_stack); the first is also the targets'.
VARIANTS = {"shapes": dict(record_shapes=True), "noshapes": dict(record_shapes=False),
            "stack": dict(record_shapes=True, with_stack=True),
            "stack_noshapes": dict(record_shapes=False, with_stack=True)}
COLD_STEPS = 3  # --cold: a fresh model profiled from its first step, no warm-up (as a first-time user records)
TARGET_SMS = (80, 40)  # benchmarks/specs_sm_limited.toml has H100-SM80 and H100-SM40
PART_BYTES = 15 << 20


# ---------------------------------------------------------------- measurement
def loop_times(step: Callable[[], None], iters: int) -> dict[str, float]:
    times = sorted(event_times_ms(step, iters))
    return dict(median_ms=statistics.median(times), p10_ms=quantile(times, 0.1), p90_ms=quantile(times, 0.9),
                steady_wall_ms=steady_wall_ms(step, iters))


def first_user_trace(step: Callable[[], None], path_gz: str, steps: int) -> tuple[int, int]:
    """A first-time user's recording: ``steps`` steps under schedule(wait=0, warmup=0, active=steps, repeat=1),
    exported when the profiler hands them over (every step recorded, ProfilerStep#0 the first it traced); with
    ``steps`` 1, one step inside a plain ``profile()`` exported after it stops (no schedule: no ProfilerStep at all).
    (raw, gz) bytes."""
    if steps > 1:
        return profile_to_gzip(step, path_gz, schedule(wait=0, warmup=0, active=steps, repeat=1), steps)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        step()
    raw_path = path_gz[:-3]
    prof.export_chrome_trace(raw_path)
    torch.cuda.synchronize()
    raw = os.path.getsize(raw_path)
    gz = gzip_to(raw_path, path_gz)
    os.remove(raw_path)
    return raw, gz


def measure(w: Workload, out: str, iters: int, info: dict[str, Any], cold: bool) -> list[dict[str, Any]]:
    """The workload's rows (module doc): with ``cold`` first the fresh model's trace, then every variant at full
    SMs, then the record_shapes trace per target."""
    seed_all()
    built = w.build(torch.device("cuda"), False)
    base = dict(gpu=info["name"], full_sms=info["sms"], torch=torch.__version__, iters=iters, note=built.note,
                base=w.name)
    pending = []

    def first_user(variant: str, steps: int) -> None:
        trace = f"{w.name}__{variant}.pt.trace.json.gz"
        raw, gz = first_user_trace(built.step, os.path.join(out, trace), steps)
        pending.append(dict(base, workload=f"{w.name}__{variant}", variant=variant, sms=info["sms"], trace=trace,
                            trace_bytes=raw, trace_gz_bytes=gz, record_shapes=True))
    if cold:
        first_user("cold", COLD_STEPS)
    for _ in range(WARMUP_ITERS):
        built.step()
    torch.cuda.synchronize()
    if cold:
        first_user("single", 1)
    loop = loop_times(built.step, iters)
    rows = [dict(r, after_ms=steady_wall_ms(built.step, max(iters // 2, 3)), **loop) for r in pending]
    for v, kw in VARIANTS.items():
        trace = f"{w.name}__{v}.pt.trace.json.gz"
        raw, gz = profile_to_gzip(built.step, os.path.join(out, trace), **kw)
        rows.append(dict(base, workload=f"{w.name}__{v}", variant=v, sms=info["sms"], trace=trace, trace_bytes=raw,
                         trace_gz_bytes=gz, after_ms=steady_wall_ms(built.step, max(iters // 2, 3)), **kw, **loop))
    post = loop_times(built.step, iters)
    for r in rows:
        r.update({f"post_{k}": v for k, v in post.items()})
    for sms in TARGET_SMS:
        try:
            with green_stream(sms):
                for _ in range(2):
                    built.step()
                truth = loop_times(built.step, iters)
                trace = f"{w.name}__shapes_sm{sms}.pt.trace.json.gz"
                raw, gz = profile_to_gzip(built.step, os.path.join(out, trace), record_shapes=True)
        except Exception as exc:  # the origin's rows stand without their targets
            print(f"target {sms} SMs of {w.name} failed: {exc!r}", flush=True)
            continue
        rows.append(dict(base, workload=f"{w.name}__shapes", variant="shapes", sms=sms, trace=trace, trace_bytes=raw,
                         trace_gz_bytes=gz, record_shapes=True, **truth))
    return rows


def pack(out: str) -> list[str]:
    """The traces in one uncompressed tar (they are gzipped), split into PART_BYTES parts: traces.tar.NN."""
    names = sorted(f for f in os.listdir(out) if f.endswith(".pt.trace.json.gz"))
    path = os.path.join(out, "traces.tar")
    with tarfile.open(path, "w") as tar:
        for n in names:
            tar.add(os.path.join(out, n), arcname=n)
    parts = []
    with open(path, "rb") as f:
        while chunk := f.read(PART_BYTES):
            parts.append(f"{path}.{len(parts):02d}")
            with open(parts[-1], "wb") as p:
                p.write(chunk)
    for n in names + ["traces.tar"]:
        os.remove(os.path.join(out, n))
    return parts


def main(argv: list[str] | None = None) -> int:
    t_start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--set", default="A", choices=sorted(SETS), help="launch_workloads.py's set (A: run 1, B: run 2)")
    ap.add_argument("--only", default="", help="comma-separated workload names (default: the whole set)")
    ap.add_argument("--cold", action="store_true", help="also the first-time users' recordings (first_user_trace)")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations without the profiler, per measurement")
    ap.add_argument("--budget-s", type=float, default=400.0, help="skip workloads that would end past this")
    ap.add_argument("--tar", action="store_true", help="pack the traces into traces.tar.NN parts at the end")
    ap.add_argument("--dry-run", action="store_true", help="CPU smoke: tiny sizes, one step, no profiler")
    a = ap.parse_args(argv)
    workloads = selected(a.only, SETS[a.set])
    os.makedirs(a.out, exist_ok=True)
    if a.dry_run:
        return run_dry(workloads, a.out)
    info = device_info()
    with open(os.path.join(a.out, "device.json"), "w") as f:
        json.dump(info, f)
    with open(os.path.join(a.out, "ground_truth.jsonl"), "a") as gt:
        rc = run_each(workloads, gt, a.budget_s, t_start, lambda w: measure(w, a.out, a.iters, info, a.cold),
                      lambda: (torch.cuda.synchronize(), torch.cuda.empty_cache()))
    if a.tar:
        print("packed", pack(a.out), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())

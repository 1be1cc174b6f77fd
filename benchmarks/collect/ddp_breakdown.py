"""Where DDP's added time goes (issue 31): the same workloads as collect_distributed.py, timed without the profiler,
on one GPU and on N GPUs in variants that take one of DDP's costs away at a time.

    python benchmarks/collect/ddp_breakdown.py --out DIR [--world 2] [--iters 15] [--budget-s 480]
    python benchmarks/collect/ddp_breakdown.py --out /tmp/ddpb --dry-run   # CPU, gloo, tiny sizes

Modes, each rank running the same step at once (every rank lined up by a barrier before each timed step, as
collect_distributed.time_steps does; and back to back, ``steady``):
- ``single``: one process on one GPU (the one-GPU step);
- ``solo``: every rank runs the plain model, no DDP, no communication (what N processes on one host cost each
  other);
- ``ddp``: DistributedDataParallel with its defaults (bucket_cap_mb 25, broadcast_buffers True);
- ``ddp_nobuf``: the same without the forward's buffer broadcast (broadcast_buffers False);
- ``ddp_nosync``: forward and backward inside ``no_sync()`` (the reducer's hooks run, no all-reduce is launched;
  the optimizer then steps on local gradients);
- ``ddp_hooked``: ``ddp`` with a communication hook that records when each rank launches each bucket's all-reduce
  (time.perf_counter: CLOCK_MONOTONIC, one clock for every process of the host; each step starts right after a
  barrier), then launches it as DDP does (default_hooks.allreduce_hook): the row adds, per step, the ranks' launch
  skew of each bucket (the later rank's launch minus the earlier's) and when each rank launched its last bucket.
``ddp - ddp_nosync`` is the all-reduce's exposed time and its interference; ``ddp_nosync - solo`` DDP's hooks and
buffer work on the host and GPU; ``solo - single`` the host sharing. Writes DIR/ddp_breakdown.jsonl (one row per
workload and mode: per-rank median and steady ms, the slowest rank's). Evaluated in docs/distributed.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from contextlib import nullcontext
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collect_distributed import (WARMUP_ITERS, every_run, free_port, join_world, leave_world, steady_ms,  # noqa: E402
                                 sync, time_steps)
from dist_workloads import WORKLOADS, Workload  # noqa: E402

MODES = ("solo", "ddp", "ddp_nobuf", "ddp_nosync", "ddp_hooked")
DEFAULT_WORKLOADS = ("resnet50_b64_fp32", "resnet50_b32_cl_amp", "vit_b16_b64_amp", "llama_d1024_l8_b4_s1024_amp",
                     "bert_large_b8_s256_amp", "gpt2_b8_s1024_amp")


def make_step(work: Workload, mode: str, device: torch.device,
              launches: list[tuple[float, int]] | None = None) -> Callable[[], None]:
    """The training step of ``mode``; ``launches`` (ddp_hooked): where the hook appends (perf_counter, bucket)."""
    model = work.model
    sync_ctx: Callable[[], Any] = nullcontext
    if mode.startswith("ddp"):
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                    broadcast_buffers=mode != "ddp_nobuf")
        if mode == "ddp_nosync":
            sync_ctx = model.no_sync
        if mode == "ddp_hooked":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks un-annotated or GradBucket
                state.append((time.perf_counter(), bucket.index()))
                return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]

            model.register_comm_hook(launches if launches is not None else [], hook)
    opt = work.optimizer(model.parameters())
    cast = (lambda: torch.autocast(device.type, dtype=work.autocast)) if work.autocast else nullcontext

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with sync_ctx():
            with cast():
                loss = work.loss(model)
            loss.backward()
        opt.step()
    return step


def launch_times(step: Callable[[], None], launches: list[tuple[float, int]], device: torch.device,
                 n: int) -> list[dict[str, Any]]:
    """Per step (each after a barrier): its time and each bucket's launch, ms after the step's start."""
    out = []
    for _ in range(n):
        dist.barrier()
        sync(device)
        launches.clear()
        t0 = time.perf_counter()
        step()
        sync(device)
        out.append({"ms": (time.perf_counter() - t0) * 1e3,
                    "launch_ms": {int(b): (t - t0) * 1e3 for t, b in launches}})
    return out


def measure(name: str, mode: str, device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    try:
        torch.manual_seed(0)
        work = WORKLOADS[name](device, args.dry_run)
        launches: list[tuple[float, int]] = []
        step = make_step(work, mode, device, launches)
        for _ in range(1 if args.dry_run else WARMUP_ITERS):
            step()
        if mode == "ddp_hooked":
            steps = launch_times(step, launches, device, args.iters)
            return {"status": "ok", "median_ms": statistics.median(s["ms"] for s in steps),
                    "steady_ms": steady_ms(step, device, args.iters), "steps": steps}
        times = time_steps(step, device, args.iters)
        return {"status": "ok", "median_ms": statistics.median(times), "steady_ms": steady_ms(step, device, args.iters)}
    except Exception as exc:  # one failing run must not hide the others
        return {"status": f"failed: {type(exc).__name__}: {exc}"[:300]}
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


def skews(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the timed steps (medians): each bucket's launch skew between the ranks, their sum, the last bucket's, and
    each rank's launch of its last bucket (ms after the step's start)."""
    steps = list(zip(*(r["steps"] for r in per_rank)))
    per_bucket: dict[int, list[float]] = {}
    total, last_skew, last = [], [], [[] for _ in per_rank]  # type: ignore[var-annotated]
    for ranks in steps:
        buckets = set.intersection(*(set(s["launch_ms"]) for s in ranks))
        sk = {b: max(s["launch_ms"][b] for s in ranks) - min(s["launch_ms"][b] for s in ranks) for b in buckets}
        for b, v in sk.items():
            per_bucket.setdefault(b, []).append(v)
        total.append(sum(sk.values()))
        final = max(buckets, key=lambda b: max(s["launch_ms"][b] for s in ranks)) if buckets else None
        if final is not None:
            last_skew.append(sk[final])
            for r, s in enumerate(ranks):
                last[r].append(s["launch_ms"][final])
    med = statistics.median
    return {"buckets": len(per_bucket), "bucket_skew_ms": {b: round(med(v), 3) for b, v in sorted(per_bucket.items())},
            "sum_skew_ms": med(total) if total else None, "last_bucket_skew_ms": med(last_skew) if last_skew else None,
            "last_launch_ms": [med(v) if v else None for v in last]}


def worker(rank: int, world: int, args: argparse.Namespace, port: int, modes: list[str]) -> None:
    device = join_world(rank, world, args, port)
    cuda = device.type == "cuda"
    for name, mode, gathered in every_run(args, world, modes, lambda name, mode: measure(name, mode, device, args)):
        if rank == 0:
            ok = all(r["status"] == "ok" for r in gathered)
            row = {"workload": name, "mode": "single" if world == 1 else mode, "world": world,
                   "per_rank_median_ms": [r.get("median_ms") for r in gathered],
                   "per_rank_steady_ms": [r.get("steady_ms") for r in gathered],
                   "slowest_rank_ms": max(r["median_ms"] for r in gathered) if ok else None,
                   "slowest_steady_ms": max(r["steady_ms"] for r in gathered) if ok else None,
                   "status": "ok" if ok else next(r["status"] for r in gathered if r["status"] != "ok"),
                   "device": torch.cuda.get_device_name(device) if cuda else "cpu", "torch": torch.__version__,
                   "utc": datetime.datetime.now(datetime.timezone.utc).isoformat()}
            if ok and mode == "ddp_hooked":
                row.update(skews(gathered))
            with open(os.path.join(args.out, "ddp_breakdown.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
            print(name, row["mode"], world, row["slowest_rank_ms"], row["status"], flush=True)
    leave_world()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    p.add_argument("--budget-s", type=float, default=480.0, help="start no run after this many seconds")
    p.add_argument("--dry-run", action="store_true", help="CPU with gloo, tiny sizes (a smoke test)")
    args = p.parse_args(argv)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    bad = [w for w in args.workloads if w not in WORKLOADS]
    if bad:
        sys.exit(f"error: unknown workload(s) {', '.join(bad)}; choose from {', '.join(WORKLOADS)}")
    if args.dry_run:
        args.iters = min(args.iters, 3)
    elif torch.cuda.device_count() < args.world:
        sys.exit(f"error: {args.world} GPUs needed, {torch.cuda.device_count()} visible; use --dry-run on a CPU")
    args.deadline = time.time() + args.budget_s
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.makedirs(args.out, exist_ok=True)
    mp.spawn(worker, args=(1, args, free_port(), ["single"]), nprocs=1, join=True)
    mp.spawn(worker, args=(args.world, args, free_port(), list(MODES)), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()

"""Ground truth for distributed steps (issue 21): DDP and FSDP training steps on N GPUs and the same model on one
GPU, each timed without the profiler and then profiled (one Kineto trace per rank), plus an nccl-tests-style
bus-bandwidth sweep with torch.distributed.

    python benchmarks/collect/collect_distributed.py --out runs/h200x2 [--world 2] [--iters 20]
    python benchmarks/collect/collect_distributed.py --dry-run --out /tmp/dist   # CPU, gloo, tiny sizes

Writes OUT/<mode>/rank<r>.pt.trace.json.gz (modes: single, ddp, fsdp), OUT/ground_truth.jsonl (per mode: the
per-rank median iteration without the profiler and the slowest rank's) and OUT/busbw.jsonl (per collective and
size: time, algbw, busbw = algbw x nccl-tests' factor). NCCL_NVLS_ENABLE=0 (NVLink SHARP / multicast off, as the
lent multi-GPU machines require); other NCCL variables the machine sets are left as they are.
Predict the 2-rank step from the traces with `habitat-trace compare OUT/ddp --to <GPU>` and compare it with
ground_truth.jsonl's slowest_rank_ms.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import sys
import time
import traceback
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

WARMUP_ITERS = 5
PROFILE_SCHEDULE = dict(wait=1, warmup=2, active=3)
MODES = ("single", "ddp", "fsdp")
# nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor(n)
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0,
}
GPU_SIZES = [2**k for k in range(10, 31, 2)]  # 1 KiB .. 1 GiB
DRY_SIZES = [2**k for k in range(10, 17, 3)]


def build_model(dry: bool) -> torch.nn.Module:
    """An 8-block MLP (Linear-GELU-Linear with residuals): its gradients are 8 x 2 x hidden^2 fp32 parameters,
    ~1 GB at hidden 4096, so the all-reduce is a large share of the DDP step as in the DLRM and LLM cases."""
    hidden, blocks = (64, 2) if dry else (4096, 8)
    layers: list[torch.nn.Module] = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(hidden, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, hidden)]
    return torch.nn.Sequential(*layers)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_step(mode: str, rank: int, device: torch.device, dry: bool) -> Callable[[], None]:
    torch.manual_seed(0)
    model = build_model(dry).to(device)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    elif mode == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        model = FSDP(model, device_id=device if device.type == "cuda" else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = 8 if dry else 64
    hidden = 64 if dry else 4096
    x = torch.randn(batch, hidden, device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        opt.step()
    return step


def time_steps(step: Callable[[], None], device: torch.device, n: int) -> float:
    """Median wall time per step, every rank lined up by a barrier first (ms)."""
    times = []
    for _ in range(n):
        if dist.is_initialized():
            dist.barrier()
        sync(device)
        t = time.perf_counter()
        step()
        sync(device)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def profile_steps(step: Callable[[], None], device: torch.device, path: str) -> None:
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    n = sum(PROFILE_SCHEDULE.values())
    with profile(activities=acts, schedule=schedule(**PROFILE_SCHEDULE), record_shapes=True) as prof:
        for _ in range(n):
            step()
            sync(device)
            prof.step()
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(path, "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


def bus_sweep(rank: int, world: int, device: torch.device, sizes: list[int], iters: int) -> list[dict[str, Any]]:
    rows = []
    for coll in BUS_FACTOR:
        for nbytes in sizes:
            n = max(nbytes // 4 // world * world, world)  # fp32 elements, divisible by the world size
            try:
                t = _time_collective(coll, n, world, device, iters)
            except (RuntimeError, NotImplementedError, ValueError) as exc:  # gloo lacks some collectives
                rows.append({"collective": coll, "bytes": n * 4, "status": f"unsupported: {exc}"[:200]})
                break
            algbw = n * 4 / (t * 1e-3) / 1e9
            rows.append({"collective": coll, "bytes": n * 4, "time_ms": t, "algbw_gbs": algbw,
                         "busbw_gbs": algbw * BUS_FACTOR[coll](world), "status": "ok"})
    return rows


def _time_collective(coll: str, n: int, world: int, device: torch.device, iters: int) -> float:
    x = torch.ones(n, device=device)
    out = torch.empty(n * world if coll == "all_gather" else n // world if coll == "reduce_scatter" else n,
                      device=device)
    op: Callable[[], Any] = {
        "all_reduce": lambda: dist.all_reduce(x),
        "all_gather": lambda: dist.all_gather_into_tensor(out, x),
        "reduce_scatter": lambda: dist.reduce_scatter_tensor(out, x),
        "all_to_all": lambda: dist.all_to_all_single(out, x),
        "broadcast": lambda: dist.broadcast(x, 0),
    }[coll]
    for _ in range(2):
        op()
    sync(device)
    return time_steps(op, device, iters)


def worker(rank: int, world: int, args: argparse.Namespace, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = torch.cuda.is_available() and not args.dry_run
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    results: dict[str, Any] = {}
    for mode in args.modes:
        if mode == "single":
            continue
        results[mode] = run_mode(mode, rank, device, args)
    sweep = bus_sweep(rank, world, device, DRY_SIZES if args.dry_run else GPU_SIZES, 3 if args.dry_run else 20)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, results)
    if rank == 0:
        with open(os.path.join(args.out, "ground_truth.jsonl"), "a") as f:
            for mode in results:
                per_rank = [g[mode] for g in gathered]
                f.write(json.dumps(summary(mode, world, per_rank, device)) + "\n")
        with open(os.path.join(args.out, "busbw.jsonl"), "a") as f:
            for row in sweep:
                f.write(json.dumps({"world": world, "device": str(device), **row}) + "\n")
    dist.destroy_process_group()


def run_mode(mode: str, rank: int, device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    if mode == "fsdp" and device.type == "cpu":
        return {"status": "skipped: torch's FSDP needs an accelerator (CPU dry run)"}
    try:
        step = make_step(mode, rank, device, args.dry_run)
        for _ in range(WARMUP_ITERS if not args.dry_run else 1):
            step()
        ms = time_steps(step, device, args.iters)
        folder = os.path.join(args.out, mode)
        os.makedirs(folder, exist_ok=True)
        profile_steps(step, device, os.path.join(folder, f"rank{rank}.pt.trace.json.gz"))
        return {"status": "ok", "median_ms": ms}
    except Exception as exc:  # recorded per mode: one failing mode must not hide the others' results
        traceback.print_exc()
        return {"status": f"failed: {type(exc).__name__}: {exc}"[:300]}


def summary(mode: str, world: int, per_rank: list[dict[str, Any]], device: torch.device) -> dict[str, Any]:
    ok = [r for r in per_rank if r["status"] == "ok"]
    return {"mode": mode, "world": world, "device": torch.cuda.get_device_name(device) if device.type == "cuda"
            else "cpu", "per_rank_median_ms": [r.get("median_ms") for r in per_rank],
            "slowest_rank_ms": max(r["median_ms"] for r in ok) if len(ok) == len(per_rank) else None,
            "status": "ok" if len(ok) == len(per_rank) else next(r["status"] for r in per_rank if r["status"] != "ok"),
            "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"), "torch": torch.__version__}


def single(args: argparse.Namespace) -> None:
    """The same model on one device, no process group."""
    cuda = torch.cuda.is_available() and not args.dry_run
    device = torch.device("cuda:0") if cuda else torch.device("cpu")
    r = run_mode("single", 0, device, args)
    with open(os.path.join(args.out, "ground_truth.jsonl"), "a") as f:
        f.write(json.dumps(summary("single", 1, [r], device)) + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated: single, ddp, fsdp")
    p.add_argument("--dry-run", action="store_true", help="CPU with gloo, tiny sizes (a smoke test)")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad:
        sys.exit(f"error: unknown mode(s) {', '.join(bad)}; choose from {', '.join(MODES)}")
    if args.dry_run:
        args.iters = min(args.iters, 3)
    elif torch.cuda.device_count() < args.world:
        sys.exit(f"error: {args.world} GPUs needed, {torch.cuda.device_count()} visible; use --dry-run on a CPU")
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink SHARP/multicast off; other NCCL_* the machine sets are kept
    os.makedirs(args.out, exist_ok=True)
    if "single" in args.modes:
        single(args)
    if any(m != "single" for m in args.modes):
        mp.spawn(worker, args=(args.world, args, free_port()), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()

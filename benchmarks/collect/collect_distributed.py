"""Ground truth for data-parallel steps (issues 21, 27): real models (dist_workloads.py: HF GPT-2, an HF Llama
decoder, BERT in fp32, torchvision ResNet-50, an MLP) on one GPU and with DDP and FSDP on N GPUs, each timed without
the profiler and then profiled (one Kineto trace per rank), plus an nccl-tests-style bus-bandwidth sweep.

    python benchmarks/collect/collect_distributed.py --out runs/h200x2 [--world 2] [--iters 20] [--budget-s 540]
    python benchmarks/collect/collect_distributed.py --dry-run --out /tmp/dist   # CPU, gloo, tiny sizes

Writes at most 7 files, so that the device tool returns them all (8 files of 16 MiB at most): OUT/ground_truth.jsonl
(one row per workload and mode: per-rank median step without the profiler, the slowest rank's, status, versions),
OUT/busbw.jsonl (per collective and size: time, algbw, busbw = algbw x nccl-tests' factor) and OUT/<workload>.tar
(<workload>/<mode>/rank<r>.pt.trace.json.gz; modes single, ddp, fsdp). NCCL_NVLS_ENABLE=0 (NVLink SHARP / multicast
off, as the lent multi-GPU machines require); other NCCL variables the machine sets are left as they are.
DDP: the defaults (bucket_cap_mb 25, gradient_as_bucket_view False). FSDP: FULL_SHARD with the defaults
(backward_prefetch BACKWARD_PRE, limit_all_gathers, no MixedPrecision: autocast inside), one unit per block
(dist_workloads.py). Evaluate with benchmarks/scaleout_eval.py OUT.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import gzip
import json
import os
import shutil
import socket
import statistics
import sys
import tarfile
import time
import traceback
from contextlib import nullcontext
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_workloads import WORKLOADS, Skip, Workload, fsdp_policy  # noqa: E402

WARMUP_ITERS = 5
PROFILE_SCHEDULE = dict(wait=1, warmup=2, active=3)
MODES = ("single", "ddp", "fsdp")
STAGING = "_traces"
# nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor(n)
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0,
}
GPU_SIZES = [2**k for k in range(10, 31, 2)]  # 1 KiB .. 1 GiB
DRY_SIZES = [2**k for k in range(10, 17, 3)]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_step(work: Workload, mode: str, device: torch.device) -> Callable[[], None]:
    model = work.model
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    elif mode == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        model = FSDP(model, auto_wrap_policy=fsdp_policy(work), device_id=device)
    opt = work.optimizer(model.parameters())
    cast = (lambda: torch.autocast(device.type, dtype=work.autocast)) if work.autocast else nullcontext

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with cast():
            loss = work.loss(model)
        loss.backward()
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
    with profile(activities=acts, schedule=schedule(**PROFILE_SCHEDULE), record_shapes=True) as prof:
        for _ in range(sum(PROFILE_SCHEDULE.values())):
            step()
            sync(device)
            prof.step()
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(path, "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


def run_one(name: str, mode: str, rank: int, device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    """Build, warm up, time and profile one workload in one mode; the outcome as a dict (never raises)."""
    if mode == "fsdp" and device.type == "cpu":
        return {"status": "skipped: torch's FSDP needs an accelerator (CPU dry run)"}
    try:
        return _measure(name, mode, rank, device, args)
    except Skip as exc:
        return {"status": f"skipped: {exc}"}
    except Exception as exc:  # recorded per run: one failing workload must not hide the others' results
        traceback.print_exc()
        return {"status": f"failed: {type(exc).__name__}: {exc}"[:300]}
    finally:  # the model and optimizer of _measure are gone: give their memory back before the next run
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def _measure(name: str, mode: str, rank: int, device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    work = WORKLOADS[name](device, args.dry_run)
    params = sum(p.numel() for p in work.model.parameters())
    step = make_step(work, mode, device)
    for _ in range(1 if args.dry_run else WARMUP_ITERS):
        step()
    ms = time_steps(step, device, args.iters)
    folder = os.path.join(args.out, STAGING, name, mode)
    os.makedirs(folder, exist_ok=True)
    profile_steps(step, device, os.path.join(folder, f"rank{rank}.pt.trace.json.gz"))
    return {"status": "ok", "median_ms": ms, "params": params, "batch": work.batch}


def summary(name: str, mode: str, world: int, per_rank: list[dict[str, Any]], device: torch.device) -> dict[str, Any]:
    ok = [r for r in per_rank if r["status"] == "ok"]
    status = "ok" if len(ok) == len(per_rank) else next(r["status"] for r in per_rank if r["status"] != "ok")
    return {"workload": name, "mode": mode, "world": world,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "per_rank_median_ms": [r.get("median_ms") for r in per_rank],
            "slowest_rank_ms": max(r["median_ms"] for r in ok) if status == "ok" else None,
            "status": status, "params": ok[0].get("params") if ok else None, "batch": ok[0].get("batch") if ok else None,
            "traces": [f"{name}.tar:{name}/{mode}/rank{r}.pt.trace.json.gz" for r in range(world)] if status == "ok"
            else [], "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"), "torch": torch.__version__,
            "nccl": str(torch.cuda.nccl.version()) if device.type == "cuda" else None,
            "transformers": _version("transformers"), "torchvision": _version("torchvision")}


def _version(module: str) -> str | None:
    try:
        return str(__import__(module).__version__)
    except Exception:
        return None


def append(out: str, name: str, rows: list[dict[str, Any]]) -> None:
    with open(os.path.join(out, name), "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def bus_sweep(world: int, device: torch.device, sizes: list[int], iters: int) -> list[dict[str, Any]]:
    rows = []
    for coll in BUS_FACTOR:
        for nbytes in sizes:
            n = max(nbytes // 4 // world * world, world)  # fp32 elements, divisible by the world size
            try:
                t = _time_collective(coll, n, world, device, iters)
            except (RuntimeError, NotImplementedError, ValueError) as exc:  # gloo lacks some collectives
                rows.append({"collective": coll, "bytes": n * 4, "status": f"unsupported: {exc}"[:200]})
                break
            size = n * 4 * (world if coll == "all_gather" else 1)  # nccl-tests' size: all-gather's output
            algbw = size / (t * 1e-3) / 1e9
            rows.append({"collective": coll, "bytes": size, "time_ms": t, "algbw_gbs": algbw,
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
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=180))
    for name in args.workloads:
        for mode in (m for m in args.modes if m != "single"):
            late = [time.time() > args.deadline]
            dist.broadcast_object_list(late, src=0)  # rank 0 decides, so that no rank waits in a collective alone
            result = {"status": "skipped: over --budget-s"} if late[0] else run_one(name, mode, rank, device, args)
            gathered: list[Any] = [None] * world
            dist.all_gather_object(gathered, result)
            if rank == 0:
                append(args.out, "ground_truth.jsonl", [summary(name, mode, world, gathered, device)])
    sweep = bus_sweep(world, device, DRY_SIZES if args.dry_run else GPU_SIZES, 3 if args.dry_run else 20)
    if rank == 0:
        append(args.out, "busbw.jsonl", [{"world": world, "device": str(device), **row} for row in sweep])
    dist.barrier()
    dist.destroy_process_group()
    # Everything is written. Leave without the interpreter's teardown: with transformers imported, a thread still
    # joinable at exit aborts a gloo worker now and then ("terminate called without an active exception").
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def single(args: argparse.Namespace) -> None:
    """Every workload on one device, no process group: the trace scale-out predicts from."""
    cuda = torch.cuda.is_available() and not args.dry_run
    device = torch.device("cuda:0") if cuda else torch.device("cpu")
    for name in args.workloads:
        r = {"status": "skipped: over --budget-s"} if time.time() > args.deadline else \
            run_one(name, "single", 0, device, args)
        append(args.out, "ground_truth.jsonl", [summary(name, "single", 1, [r], device)])


def pack(out: str) -> list[str]:
    """One uncompressed tar per workload (the traces are gzipped already); the staging folder removed."""
    staging = os.path.join(out, STAGING)
    made = []
    for name in sorted(os.listdir(staging)) if os.path.isdir(staging) else []:
        path = os.path.join(out, f"{name}.tar")
        with tarfile.open(path, "w") as tar:
            tar.add(os.path.join(staging, name), arcname=name)
        made.append(path)
    shutil.rmtree(staging, ignore_errors=True)
    return made


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated: single, ddp, fsdp")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, from: {', '.join(WORKLOADS)}")
    p.add_argument("--budget-s", type=float, default=540.0, help="start no run after this many seconds")
    p.add_argument("--dry-run", action="store_true", help="CPU with gloo, tiny sizes (a smoke test)")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad:
        sys.exit(f"error: unknown mode(s) {', '.join(bad)}; choose from {', '.join(MODES)}")
    bad = [w for w in args.workloads if w not in WORKLOADS]
    if bad:
        sys.exit(f"error: unknown workload(s) {', '.join(bad)}; choose from {', '.join(WORKLOADS)}")
    args.deadline = time.time() + args.budget_s
    if args.dry_run:
        args.iters = min(args.iters, 3)
    elif torch.cuda.device_count() < args.world:
        sys.exit(f"error: {args.world} GPUs needed, {torch.cuda.device_count()} visible; use --dry-run on a CPU")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink SHARP/multicast off; other NCCL_* the machine sets are kept
    os.makedirs(args.out, exist_ok=True)
    if "single" in args.modes:
        single(args)
    if any(m != "single" for m in args.modes):
        mp.spawn(worker, args=(args.world, args, free_port()), nprocs=args.world, join=True)
    for path in pack(args.out):
        print(f"wrote {path} ({os.path.getsize(path) / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()

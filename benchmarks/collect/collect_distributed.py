"""Ground truth for data-parallel steps (issues 21, 27, 31): real models (dist_workloads.py) on one GPU and on N GPUs
with DDP, FSDP2 (``fully_shard``) and FSDP1 (``FullyShardedDataParallel``), each timed without the profiler and then
profiled (one Kineto trace per rank), the same step run on every GPU at once without communication (``solo``: what
N processes on one host cost each other, apart from NCCL), and an nccl-tests-style bus-bandwidth sweep.

    python benchmarks/collect/collect_distributed.py --out runs/h100x4 --worlds 2,4 [--iters 15] [--budget-s 480]
    python benchmarks/collect/collect_distributed.py --dry-run --out /tmp/dist   # CPU, gloo, tiny sizes

Writes at most 8 files, so that the device tool returns them all (8 files of 16 MiB, 64 MiB in all):
OUT/ground_truth.jsonl (one row per workload, mode and world: per-rank median step without the profiler, each
timed iteration, the slowest rank's median, the back-to-back wall time per step, status, versions), OUT/busbw.jsonl
(per world, collective and size: time, algbw, busbw = algbw x nccl-tests' factor; and one row of the host's GPUs)
and OUT/traces.tar.xz.NN (one xz-compressed tar of <workload>/<mode>[-w<N>]/rank<r>.pt.trace.json, cut in parts of
PART_BYTES; where it would not fit, the lower-priority modes' traces are left out, said in each row's ``traces``).
Every run, the one-GPU one included, is in a process of its own (torch.multiprocessing), so that no run's CUDA
context or allocator sits on a GPU another run uses. NCCL_NVLS_ENABLE=0 (NVLink SHARP / multicast off, as the lent
multi-GPU machines require); other NCCL variables the machine sets are left as they are. DDP: the defaults
(bucket_cap_mb 25, gradient_as_bucket_view False). FSDP2: ``fully_shard`` on every unit (dist_workloads.py's
predicate) and the root, defaults (reshard_after_forward True, no MixedPrecisionPolicy: autocast inside); FSDP1:
FULL_SHARD with the same units and its defaults. Evaluate with benchmarks/scaleout_eval.py OUT.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import lzma
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import time
import traceback
from contextlib import nullcontext
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_workloads import WORKLOADS, Skip, Workload, fsdp_policy  # noqa: E402

WARMUP_ITERS = 4
PROFILE_SCHEDULE = dict(wait=1, warmup=1, active=2)
MODES = ("single", "ddp", "fsdp", "fsdp1", "solo")
# The traces left out first when the archive would not fit the device tool's 64 MiB (the rows stay)
DROP_ORDER = ("solo", "fsdp1")
STAGING = "_traces"
PART_BYTES = 15 * 2**20
MAX_PARTS = 4
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


def wrap(work: Workload, mode: str, device: torch.device) -> torch.nn.Module:
    """The workload's model as ``mode`` trains it."""
    model = work.model
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    if mode == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        return FSDP(model, auto_wrap_policy=fsdp_policy(work), device_id=device)
    if mode == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for unit in [m for m in model.modules() if m is not model and work.wrap(m)]:
            fully_shard(unit)
        fully_shard(model)
    return model


def make_step(work: Workload, mode: str, device: torch.device) -> Callable[[], None]:
    model = wrap(work, mode, device)
    opt = work.optimizer(model.parameters())
    cast = (lambda: torch.autocast(device.type, dtype=work.autocast)) if work.autocast else nullcontext

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with cast():
            loss = work.loss(model)
        loss.backward()
        opt.step()
    return step


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def time_steps(step: Callable[[], None], device: torch.device, n: int) -> list[float]:
    """Wall time of each of ``n`` steps (ms), every rank lined up by a barrier before each."""
    times = []
    for _ in range(n):
        barrier()
        sync(device)
        t = time.perf_counter()
        step()
        sync(device)
        times.append((time.perf_counter() - t) * 1e3)
    return times


def steady_ms(step: Callable[[], None], device: torch.device, n: int) -> float:
    """Wall time per step of ``n`` steps back to back (the host runs ahead of the GPU, as in a training loop)."""
    barrier()
    sync(device)
    t = time.perf_counter()
    for _ in range(n):
        step()
    sync(device)
    return (time.perf_counter() - t) * 1e3 / n


def profile_steps(step: Callable[[], None], device: torch.device, path: str) -> None:
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts, schedule=schedule(**PROFILE_SCHEDULE), record_shapes=True) as prof:
        for _ in range(sum(PROFILE_SCHEDULE.values())):
            step()
            sync(device)
            prof.step()
    prof.export_chrome_trace(path)


def run_one(name: str, mode: str, world: int, rank: int, device: torch.device,
            args: argparse.Namespace) -> dict[str, Any]:
    """Build, warm up, time and profile one workload in one mode; the outcome as a dict (never raises)."""
    if mode == "fsdp1" and device.type == "cpu":
        return {"status": "skipped: torch's FSDP1 needs an accelerator (CPU dry run)"}
    try:
        return _measure(name, mode, world, rank, device, args)
    except Skip as exc:
        return {"status": f"skipped: {exc}"}
    except Exception as exc:  # recorded per run: one failing workload must not hide the others' results
        traceback.print_exc()
        return {"status": f"failed: {type(exc).__name__}: {exc}"[:300]}
    finally:  # the model and optimizer of _measure are gone: give their memory back before the next run
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def folder_of(mode: str, world: int) -> str:
    return "single" if mode == "single" else f"{mode}-w{world}"


def _measure(name: str, mode: str, world: int, rank: int, device: torch.device,
             args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    work = WORKLOADS[name](device, args.dry_run)
    params = sum(p.numel() for p in work.model.parameters())
    step = make_step(work, mode, device)
    for _ in range(1 if args.dry_run else WARMUP_ITERS):
        step()
    times = time_steps(step, device, args.iters)
    steady = steady_ms(step, device, args.iters)
    folder = os.path.join(args.out, STAGING, name, folder_of(mode, world))
    os.makedirs(folder, exist_ok=True)
    profile_steps(step, device, os.path.join(folder, f"rank{rank}.pt.trace.json"))
    return {"status": "ok", "median_ms": statistics.median(times), "iter_ms": [round(t, 4) for t in times],
            "steady_ms": steady, "params": params, "batch": work.batch,
            "gpu_index": device.index if device.type == "cuda" else None}


def summary(name: str, mode: str, world: int, per_rank: list[dict[str, Any]], device: torch.device) -> dict[str, Any]:
    ok = [r for r in per_rank if r["status"] == "ok"]
    status = "ok" if len(ok) == len(per_rank) else next(r["status"] for r in per_rank if r["status"] != "ok")
    good = status == "ok"
    where = f"{name}/{folder_of(mode, world)}"
    return {"workload": name, "mode": mode, "world": world,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "per_rank_median_ms": [r.get("median_ms") for r in per_rank],
            "per_rank_iter_ms": [r.get("iter_ms") for r in per_rank],
            "per_rank_steady_ms": [r.get("steady_ms") for r in per_rank],
            "slowest_rank_ms": max(r["median_ms"] for r in ok) if good else None,
            "slowest_steady_ms": max(r["steady_ms"] for r in ok) if good else None,
            "gpus": [r.get("gpu_index") for r in per_rank],
            "status": status, "params": ok[0].get("params") if ok else None, "batch": ok[0].get("batch") if ok else None,
            "traces": [f"{where}/rank{r}.pt.trace.json" for r in range(len(per_rank))] if good else [],
            "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"), "torch": torch.__version__,
            "nccl": str(torch.cuda.nccl.version()) if device.type == "cuda" else None,
            "transformers": _version("transformers"), "torchvision": _version("torchvision"),
            "host": socket.gethostname(), "utc": datetime.datetime.now(datetime.timezone.utc).isoformat()}


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
                t = statistics.median(_time_collective(coll, n, world, device, iters))
            except (RuntimeError, NotImplementedError, ValueError) as exc:  # gloo lacks some collectives
                rows.append({"collective": coll, "bytes": n * 4, "status": f"unsupported: {exc}"[:200]})
                break
            size = n * 4 * (world if coll == "all_gather" else 1)  # nccl-tests' size: all-gather's output
            algbw = size / (t * 1e-3) / 1e9
            rows.append({"collective": coll, "bytes": size, "time_ms": t, "algbw_gbs": algbw,
                         "busbw_gbs": algbw * BUS_FACTOR[coll](world), "status": "ok"})
    return rows


def _time_collective(coll: str, n: int, world: int, device: torch.device, iters: int) -> list[float]:
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


def join_world(rank: int, world: int, args: argparse.Namespace, port: int) -> torch.device:
    """This rank's device, and the process group of ``world`` ranks (NCCL on GPUs, gloo for --dry-run)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = torch.cuda.is_available() and not args.dry_run
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    return device


def every_run(args: argparse.Namespace, world: int, modes: list[str],
              run: Callable[[str, str], dict[str, Any]]) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """``run(workload, mode)`` on every rank for every workload and mode (a run skipped once past --budget-s), and
    every rank's outcome, gathered on all of them: (workload, mode, outcomes by rank)."""
    for name in args.workloads:
        for mode in modes:
            late = [time.time() > args.deadline]
            dist.broadcast_object_list(late, src=0)  # rank 0 decides, so that no rank waits in a collective alone
            result = {"status": "skipped: over --budget-s"} if late[0] else run(name, mode)
            gathered: list[Any] = [None] * world
            dist.all_gather_object(gathered, result)
            yield name, mode, gathered


def leave_world() -> None:
    """Everything is written: leave without the interpreter's teardown (with transformers imported, a thread still
    joinable at exit aborts a gloo worker now and then: "terminate called without an active exception")."""
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def worker(rank: int, world: int, args: argparse.Namespace, port: int, modes: list[str]) -> None:
    """One rank of a world: every workload in every mode of ``modes`` (a world of one is the 'single' run)."""
    device = join_world(rank, world, args, port)
    for name, mode, gathered in every_run(args, world, modes,
                                          lambda name, mode: run_one(name, mode, world, rank, device, args)):
        if rank == 0:
            append(args.out, "ground_truth.jsonl", [summary(name, mode, world, gathered, device)])
    if world > 1 and not args.no_sweep:
        sweep = bus_sweep(world, device, DRY_SIZES if args.dry_run else GPU_SIZES, 3 if args.dry_run else 12)
        if rank == 0:
            append(args.out, "busbw.jsonl", [{"world": world, "device": str(device), **row} for row in sweep])
    leave_world()


def host_row() -> dict[str, Any]:
    """The host's GPUs as nvidia-smi reports them (name, clocks, power limit, topology), for busbw.jsonl."""
    row: dict[str, Any] = {"host": socket.gethostname(), "cpus": os.cpu_count()}
    queries = {"gpus": ["nvidia-smi", "--query-gpu=index,name,clocks.max.sm,clocks.sm,power.limit,temperature.gpu",
                        "--format=csv,noheader"], "topology": ["nvidia-smi", "topo", "-m"]}
    for key, cmd in queries.items():
        try:
            row[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        except (OSError, subprocess.SubprocessError) as exc:
            row[key] = f"unavailable: {exc}"
    return row


def pack(out: str, rows: list[dict[str, Any]]) -> list[str]:
    """Every trace in one xz-compressed tar cut in parts of PART_BYTES, at most MAX_PARTS of them: where the
    archive would be larger, the modes of DROP_ORDER are left out one by one (their rows say so); staging removed."""
    staging = os.path.join(out, STAGING)
    members = sorted(os.path.relpath(os.path.join(d, f), staging) for d, _, fs in os.walk(staging) for f in fs)
    dropped: list[str] = []
    while True:
        data = _archive(staging, [m for m in members if m.split("/")[1].split("-w")[0] not in dropped])
        if len(data) <= PART_BYTES * MAX_PARTS or len(dropped) == len(DROP_ORDER):
            break
        dropped.append(DROP_ORDER[len(dropped)])
    made = []
    for i in range(0, min(len(data), PART_BYTES * MAX_PARTS), PART_BYTES):
        path = os.path.join(out, f"traces.tar.xz.{i // PART_BYTES:02d}")
        with open(path, "wb") as f:
            f.write(data[i:i + PART_BYTES])
        made.append(path)
    if dropped:
        for r in rows:
            if r["mode"] in dropped:
                r["traces"] = []
                r["note"] = "traces left out: the archive would not fit the device tool's 64 MiB"
    shutil.rmtree(staging, ignore_errors=True)
    return made


def _archive(staging: str, members: list[str]) -> bytes:
    tar_path = staging + ".tar"
    with tarfile.open(tar_path, "w") as tar:
        for m in members:
            tar.add(os.path.join(staging, m), arcname=m)
    xz = shutil.which("xz")
    if xz:  # multi-threaded; python's lzma is single-threaded and takes minutes on a GB of JSON
        data = subprocess.run([xz, "-T0", "-6", "-c", tar_path], capture_output=True, check=True).stdout
    else:
        with open(tar_path, "rb") as f:
            data = lzma.compress(f.read(), preset=3)
    os.remove(tar_path)
    return data


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--worlds", default="2", help="comma-separated world sizes, run in this order")
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--modes", default="single,ddp,fsdp", help=f"comma-separated, from: {', '.join(MODES)}")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, from: {', '.join(WORKLOADS)}")
    p.add_argument("--budget-s", type=float, default=480.0, help="start no run after this many seconds")
    p.add_argument("--no-sweep", action="store_true", help="skip the bus-bandwidth sweep")
    p.add_argument("--dry-run", action="store_true", help="CPU with gloo, tiny sizes (a smoke test)")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    args.worlds = [int(w) for w in args.worlds.split(",") if w.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad:
        sys.exit(f"error: unknown mode(s) {', '.join(bad)}; choose from {', '.join(MODES)}")
    bad = [w for w in args.workloads if w not in WORKLOADS]
    if bad:
        sys.exit(f"error: unknown workload(s) {', '.join(bad)}; choose from {', '.join(WORKLOADS)}")
    if any(w < 2 for w in args.worlds):
        sys.exit("error: --worlds takes sizes >= 2 (the one-GPU run is the mode 'single')")
    args.deadline = time.time() + args.budget_s
    if args.dry_run:
        args.iters = min(args.iters, 3)
    elif set(args.modes) - {"single"} and torch.cuda.device_count() < max(args.worlds):  # 'single' alone: 1 GPU
        sys.exit(f"error: {max(args.worlds)} GPUs needed, {torch.cuda.device_count()} visible; use --dry-run on a CPU")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink SHARP/multicast off; other NCCL_* the machine sets are kept
    os.makedirs(args.out, exist_ok=True)
    if not args.dry_run:
        append(args.out, "busbw.jsonl", [host_row()])
    if "single" in args.modes:
        mp.spawn(worker, args=(1, args, free_port(), ["single"]), nprocs=1, join=True)
    for world in args.worlds:
        modes = [m for m in args.modes if m != "single"]
        if modes:
            mp.spawn(worker, args=(world, args, free_port(), modes), nprocs=world, join=True)
    path = os.path.join(args.out, "ground_truth.jsonl")
    rows = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
    made = pack(args.out, rows)
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    for p in made:
        print(f"wrote {p} ({os.path.getsize(p) / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()

"""Why a data-parallel rank's host runs slower than the one GPU's (issue 31): the same step on one GPU, on N GPUs at
once without communication (``solo``) and with DDP, under four host settings: as collect_distributed.py runs it
(``default``: torch.multiprocessing, torch's intra-op threads = the CPUs), ``omp1`` (OMP_NUM_THREADS=1, what torchrun
sets for every rank "to avoid your system being overloaded"), ``pinned`` (each rank on its own physical cores, their
SMT siblings with them) and ``omp1_pinned``.

    python benchmarks/collect/ddp_host_env.py --out OUT --world 2 --workloads phi_d1024_l8_b4_s1024_amp,vit_b16_b64_amp
    python benchmarks/collect/ddp_host_env.py --dry-run --out /tmp/henv --world 2 --workloads mlp   # CPU, gloo

Per rank, not profiled: each step's wall time (``--iters``, a barrier and a sync around each, as
collect_distributed.time_steps), the back-to-back wall time per step, the main thread's CPU time per step
(time.thread_time around step(): the host's own work, a wait on a full launch queue included), every thread's CPU
time per step by name (/proc/self/task: the autograd engine's backward thread, NCCL's), the main thread's
involuntary context switches per step (/proc/thread-self/status: the scheduler took its CPU away), the process's
threads, its CPUs and torch's intra-op threads. OUT/host_env.jsonl: one row per workload, setting and mode;
OUT/host.json: lscpu, the CPUs' core and package ids, nvidia-smi topo -m.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collect_distributed import (WARMUP_ITERS, free_port, join_world, leave_world, make_step,  # noqa: E402
                                 steady_ms, time_steps)
from dist_workloads import WORKLOADS  # noqa: E402

SETTINGS = {"default": (False, False), "omp1": (True, False), "pinned": (False, True), "omp1_pinned": (True, True)}
MODES = ("single", "solo", "ddp")


def physical_cores() -> list[list[int]]:
    """The CPUs this process may run on, grouped by physical core (package id, core id), in CPU order."""
    cores: dict[tuple[int, int], list[int]] = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            key = (int(open(f"{base}/physical_package_id").read()), int(open(f"{base}/core_id").read()))
        except OSError:
            key = (0, cpu)
        cores.setdefault(key, []).append(cpu)
    return sorted(cores.values())


def rank_cpus(rank: int, world: int, cores: list[list[int]]) -> list[int]:
    """A disjoint block of whole physical cores for ``rank`` of ``world`` (at most 8 cores each)."""
    per = max(1, min(8, len(cores) // max(world, 1)))
    block = cores[rank * per:(rank + 1) * per] or cores[-per:]
    return [cpu for core in block for cpu in core]


def involuntary_switches() -> int:
    try:
        for line in open("/proc/thread-self/status"):
            if line.startswith("nonvoluntary_ctxt_switches"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def threads_cpu() -> dict[int, tuple[str, int]]:
    """Every thread of this process: (its name, its user + system CPU time in clock ticks), from /proc."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            name = open(f"/proc/self/task/{tid}/comm").read().strip()
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
            out[int(tid)] = (name, int(fields[11]) + int(fields[12]))  # utime, stime: stat fields 14 and 15
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return out


def by_name(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]], n: int) -> dict[str, float]:
    """CPU ms per step of each thread name (the digits of a name dropped: one entry per kind of thread)."""
    tick_ms = 1e3 / os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid, (name, ticks) in after.items():
        kind = name.rstrip("0123456789") or name
        out[kind] = out.get(kind, 0.0) + (ticks - before.get(tid, (name, 0))[1]) * tick_ms / n
    return {k: round(v, 3) for k, v in sorted(out.items()) if v > 0}


def host_measure(step: Callable[[], None], device: torch.device, n: int) -> dict[str, Any]:
    """The main thread's CPU time and involuntary switches per step over ``n`` steps run back to back, and every
    thread's CPU time per step by thread name (the autograd engine's, NCCL's, the profiler's none here)."""
    barrier = dist.barrier if dist.is_initialized() else (lambda: None)
    barrier()
    switches, cpu, threads = involuntary_switches(), time.thread_time(), threads_cpu()
    for _ in range(n):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return {"thread_cpu_ms": (time.thread_time() - cpu) * 1e3 / n,
            "involuntary_per_step": (involuntary_switches() - switches) / n,
            "threads_cpu_ms": by_name(threads, threads_cpu(), n)}


def worker(rank: int, world: int, args: argparse.Namespace, port: int, setting: str, mode: str,
           name: str) -> None:
    _, pinned = SETTINGS[setting]
    cores = physical_cores()
    if pinned:
        os.sched_setaffinity(0, rank_cpus(rank, world, cores))
    device = join_world(rank, world, args, port)
    torch.manual_seed(0)
    row: dict[str, Any]
    try:
        work = WORKLOADS[name](device, args.dry_run)
        step = make_step(work, "ddp" if mode == "ddp" else "single", device)
        for _ in range(1 if args.dry_run else WARMUP_ITERS):
            step()
        times = time_steps(step, device, args.iters)
        row = {"status": "ok", "median_ms": statistics.median(times), "iter_ms": [round(t, 3) for t in times],
               "steady_ms": steady_ms(step, device, args.iters), **host_measure(step, device, args.iters),
               "threads": len(os.listdir("/proc/self/task")), "cpus": len(os.sched_getaffinity(0)),
               "torch_threads": torch.get_num_threads(), "omp_env": os.environ.get("OMP_NUM_THREADS")}
    except Exception as exc:  # one failing run must not hide the others
        row = {"status": f"failed: {type(exc).__name__}: {exc}"[:300]}
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, row)
    if rank == 0:
        with open(os.path.join(args.out, "host_env.jsonl"), "a") as f:
            f.write(json.dumps({"workload": name, "setting": setting, "mode": mode, "world": world,
                                "per_rank": gathered, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                "slowest_ms": max((r.get("median_ms") or 0.0) for r in gathered)}) + "\n")
    leave_world()


def host_facts() -> dict[str, Any]:
    cores = physical_cores()
    out: dict[str, Any] = {"cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                           "physical_cores": len(cores), "cores": cores}
    for key, cmd in {"lscpu": ["lscpu"], "topology": ["nvidia-smi", "topo", "-m"]}.items():
        try:
            out[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.splitlines()
        except (OSError, subprocess.SubprocessError) as exc:
            out[key] = f"unavailable: {exc}"
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--workloads", required=True)
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--budget-s", type=float, default=420.0, help="start no run after this many seconds")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    bad = [w for w in args.workloads.split(",") if w not in WORKLOADS]
    bad += [s for s in args.settings.split(",") if s not in SETTINGS]
    bad += [m for m in args.modes.split(",") if m not in MODES]
    if bad:
        sys.exit(f"error: unknown workload, setting or mode: {', '.join(bad)} (workloads: dist_workloads.WORKLOADS; "
                 f"settings: {', '.join(SETTINGS)}; modes: {', '.join(MODES)})")
    deadline = time.time() + args.budget_s
    os.makedirs(args.out, exist_ok=True)
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    with open(os.path.join(args.out, "host.json"), "w") as f:
        json.dump(host_facts(), f)
    for name in args.workloads.split(","):
        for setting in args.settings.split(","):
            omp1, _ = SETTINGS[setting]
            saved = os.environ.get("OMP_NUM_THREADS")
            if omp1:
                os.environ["OMP_NUM_THREADS"] = "1"
            else:
                os.environ.pop("OMP_NUM_THREADS", None)
            for mode in args.modes.split(","):
                if time.time() > deadline:
                    print(f"skipped {name} {setting} {mode}: over --budget-s", flush=True)
                    continue
                world = 1 if mode == "single" else args.world
                t = time.time()
                mp.spawn(worker, args=(world, args, free_port(), setting, mode, name), nprocs=world, join=True)
                print(f"{name} {setting} {mode} x{world}: {time.time() - t:.0f} s", flush=True)
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved


if __name__ == "__main__":
    main()

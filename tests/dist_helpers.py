"""Synthetic DDP-style Kineto traces with the real NCCL field names (HTA's a100_nccl trace spells them so):
per step a GEMM kernel (launched by aten::mm) then an NCCL all-reduce launched from record_param_comms."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Optional

GEMM = "volta_sgemm_128x64_nn"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def comm_args(nelems: int, group: int, seq: Optional[int], with_size: bool = True) -> dict[str, Any]:
    a: dict[str, Any] = {"Collective name": "allreduce", "dtype": "Float", "Process Group Name": "0",
                         "Process Group Ranks": str(list(range(group))), "Global rank start": 0,
                         "Global rank stride": 1, "In split size": "[]", "Out split size": "[]"}
    if with_size:
        a.update({"In msg nelems": nelems, "Out msg nelems": nelems, "Group size": group})
    if seq is not None:
        a["Seq"] = seq
    return a


def launched(pid: int, op: tuple[str, float, float, list], launch: tuple[float, float],
             kernel: tuple[str, float, float, list[int], int, int], corr: int, ext: int) -> list[dict[str, Any]]:
    """An op (name, ts, dur, input dims; fp32 inputs) on thread 1 that launches (ts, dur) one kernel (name, ts, dur,
    grid, registers per thread, shared memory; 256 threads a block) on stream 7."""
    name, ts, dur, dims = op
    kname, kts, kdur, grid, regs, smem = kernel
    return [{"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": dur,
             "args": {"External id": ext, "Input Dims": dims, "Input type": ["float"] * len(dims)}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": 1, "ts": launch[0],
             "dur": launch[1], "args": {"correlation": corr, "External id": ext}},
            {"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": kts, "dur": kdur,
             "args": {"device": 0, "stream": 7, "correlation": corr, "External id": ext, "grid": grid,
                      "block": [256, 1, 1], "registers per thread": regs, "shared memory": smem}}]


def ddp_trace(rank: int = 0, world: int = 2, device: str = "Tesla V100-SXM2-32GB", steps: int = 2,
              gemm_us: float = 500.0, nccl_us: float = 800.0, nelems: int = 25_000_000,
              with_size: bool = True, with_seq: bool = True, distributed: bool = True) -> dict[str, Any]:
    """One rank's trace: ``steps`` ProfilerSteps of [mm -> GEMM kernel, all-reduce -> NCCL kernel, sync]."""
    ev: list[dict[str, Any]] = []
    pid, tid, t, corr, ext = 100 + rank, 1, 1000.0, 1, 1
    gpu_free = 0.0
    for s in range(steps):
        step_start = t
        body: list[dict[str, Any]] = []
        # GEMM
        k0 = max(t + 25, gpu_free)
        body += launched(pid, ("aten::mm", t, 30, [[1024, 1024], [1024, 1024]]), (t + 10, 10),
                         (GEMM, k0, gemm_us, [128, 8, 1], 120, 16384), corr, ext)
        gpu_free = k0 + gemm_us
        t, corr, ext = t + 40, corr + 1, ext + 1
        # all-reduce on the NCCL stream, after the GEMM (DDP's bucket is ready)
        args = comm_args(nelems, world, s if with_seq else None, with_size)
        body.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": pid, "tid": tid, "ts": t,
                     "dur": 30, "args": {"External id": ext, **args}})
        # DDP's bucket-ready event: the NCCL stream waits for the GEMM (timeline/links.py pairs them)
        body.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": pid, "tid": tid,
                     "ts": t + 1, "dur": 1, "args": {"correlation": corr, "External id": ext}})
        corr += 1
        body.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": pid, "tid": tid,
                     "ts": t + 3, "dur": 3, "args": {"correlation": corr, "External id": ext}})
        corr += 1
        body.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                     "ts": t + 10, "dur": 10, "args": {"correlation": corr, "External id": ext}})
        k1 = gpu_free + 5
        kargs = {"device": 0, "stream": 20, "correlation": corr, "External id": ext, "grid": [8, 1, 1],
                 "block": [544, 1, 1], "registers per thread": 96, "shared memory": 87568, **args}
        body.append({"ph": "X", "cat": "kernel", "name": ALLREDUCE, "pid": 0, "tid": 20, "ts": k1, "dur": nccl_us,
                     "args": kargs})
        gpu_free = k1 + nccl_us
        t, corr, ext = t + 40, corr + 1, ext + 1
        # the step ends with a sync on the result
        sync_end = max(t + 10, gpu_free + 5)
        body.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": pid, "tid": tid,
                     "ts": t, "dur": sync_end - t, "args": {"correlation": corr}})
        corr += 1
        t = sync_end + 5
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": pid, "tid": tid,
                   "ts": step_start, "dur": t - step_start, "args": {}})
        ev.extend(body)
        t += 5
    doc: dict[str, Any] = {"schemaVersion": 1,
                           "deviceProperties": [{"id": 0, "name": device, "numSms": 80}],
                           "traceEvents": ev}
    if distributed:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world,
                                  "nccl_version": "2.17.1",
                                  "pg_config": [{"pg_name": "0", "pg_size": world, "ranks": list(range(world))}]}
    return doc


def write(doc: dict[str, Any], path: Path) -> Path:
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def launch_bound_trace(rank: int = 0, world: int = 2, launches: int = 1200, kernel_us: float = 20.0,
                       device: str = "NVIDIA H100 80GB HBM3") -> dict[str, Any]:
    """One ProfilerStep that launches more kernels on one stream than the launch queue holds (1021), each short
    to launch and long to run, then synchronizes: a replay must block the launches once the queue is full."""
    pid, tid, t = 100 + rank, 1, 1000.0
    ev: list[dict[str, Any]] = []
    gpu_free = t
    for i in range(launches):
        corr = i + 1
        start = max(t + 2, gpu_free)
        ev += launched(pid, ("aten::add_", t, 3, [[4096, 1024], [4096, 1024]]), (t + 1, 1),
                       ("elementwise_add_kernel", start, kernel_us, [4096, 1, 1], 32, 0), corr, corr)
        gpu_free, t = start + kernel_us, t + 4
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": pid, "tid": tid, "ts": t,
               "dur": gpu_free - t + 5, "args": {"correlation": launches + 1}})
    end = gpu_free + 10
    ev.insert(0, {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": pid, "tid": tid, "ts": 1000.0,
                  "dur": end - 1000.0, "args": {}})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device, "numSms": 132}], "traceEvents": ev,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world, "nccl_version": "2.17.1"}}


def replicate_ranks(sources: list[Path], world: int, out: Path) -> list[Path]:
    """A ``world``-rank run from the rank traces ``sources`` of a real run: rank r is ``sources[r % len(sources)]``
    with distributedInfo's rank r and world size ``world``. Every copy keeps its collectives (process group, Seq,
    order), so each matches on every rank; the joint replay waits for the slowest source rank's copies."""
    import orjson

    out.mkdir(parents=True, exist_ok=True)
    docs = [orjson.loads(gzip.decompress(s.read_bytes()) if s.suffix == ".gz" else s.read_bytes()) for s in sources]
    files = []
    for r in range(world):
        doc = docs[r % len(docs)]
        info = {**(doc.get("distributedInfo") or {}), "rank": r, "world_size": world}
        path = out / f"rank{r:04d}.pt.trace.json.gz"
        path.write_bytes(gzip.compress(orjson.dumps({**doc, "distributedInfo": info}), compresslevel=1))
        files.append(path)
    return files

"""CUDA occupancy, vectorized: blocks per SM, the binding limit, warp occupancy and waves.

Each function takes per-kernel arrays (threads per block, registers per thread, shared memory bytes per
block = static + dynamic, as Kineto writes it) and one ``OccupancyLimits``; the rules are those of
``cudaOccMaxActiveBlocksPerMultiprocessor`` in NVIDIA's ``cuda_occupancy.h`` (CUDA 13.0 toolkit,
include/cuda_occupancy.h; the same functions since CUDA 11), cited per rule below. tests/test_occupancy.py
checks 4,000 launches against the header itself and Kineto's CUPTI-based estimate in real traces.

Choices, where the header leaves one to the caller:
- Registers reported as 0 (unknown, or a kernel without registers) mean "no register limit"; this is
  what the header does too (``regsAllocatedPerWarp == 0`` gives ``INT_MAX`` blocks).
- Shared memory is checked against the opt-in per-block cap (``FUNC_SHMEM_LIMIT_OPTIN``): a kernel that
  ran with more than 48 KiB did opt in. (Kineto's "est. achieved occupancy %" uses the 48 KiB default
  cap instead and so reports 0 for such kernels; see tests/test_occupancy.py.)
- Carveout: the header's default preference (``SHAREDMEM_CARVEOUT_DEFAULT``, no cache config) takes
  the whole ``sharedMemPerMultiprocessor`` as the SM's shared memory, so the carveout never lowers the
  block count. The driver then configures the smallest carveout that holds those blocks (CUDA C++
  Programming Guide, "Shared Memory" of cc 8.x/9.0: the preferred carveout is only a hint);
  ``carveout_bytes`` returns that choice, which matters for L1 size, not for occupancy.
- Partitioned global caching (cc 5.2/6.x only) is off, as ``cudaFuncAttributes`` converts it; block
  barriers and virtual resources (cc 9.0+ / 10.0+ extras) are not in Kineto traces and are ignored.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from habitat_trace.scale.gpu import OccupancyLimits

NO_LIMIT = np.int64(1 << 40)  # "this resource does not limit", the header's INT_MAX
LIMITERS = ("warps", "registers", "shared_mem", "blocks")  # tie order: the header's limitingFactors bits
KIB = 1024


def _round_up(x: np.ndarray, unit: int) -> np.ndarray:
    return -(-x // unit) * unit


def _inputs(threads_per_block: np.ndarray, registers_per_thread: np.ndarray,
            shared_mem_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t, r, s = np.broadcast_arrays(*(np.asarray(a, dtype=np.int64) for a in
                                    (threads_per_block, registers_per_thread, shared_mem_bytes)))
    if t.size and t.min() < 1:
        raise ValueError("threads_per_block must be >= 1 (a kernel launch has at least one thread)")
    if r.size and (r.min() < 0 or s.min() < 0):
        raise ValueError("registers_per_thread and shared_mem_bytes must be >= 0")
    return t, r, s


def _warps_per_block(threads: np.ndarray, lim: OccupancyLimits) -> np.ndarray:
    return -(-threads // lim.warp_size)


def _by_warps(threads: np.ndarray, lim: OccupancyLimits) -> np.ndarray:
    # cudaOccMaxBlocksPerSMWarpsLimit: maxWarpsPerSm / ceil(blockSize / warpSize); 0 past maxThreadsPerBlock.
    max_warps = min(lim.max_warps_per_sm, lim.max_threads_per_sm // lim.warp_size)
    blocks = max_warps // _warps_per_block(threads, lim)
    return np.where(threads > lim.max_threads_per_block, 0, blocks)


def _by_registers(threads: np.ndarray, regs: np.ndarray, lim: OccupancyLimits,
                  partitions: int) -> np.ndarray:
    # cudaOccMaxBlocksPerSMRegsLimit: registers go to warps in units of the allocation granularity, and
    # each of the SM's sub-partitions holds registers_per_sm / partitions of them. The hardware check
    # rounds the block's warps up to a multiple of the sub-partitions ("regsAssumedPerCTA").
    warps = _warps_per_block(threads, lim)
    per_warp = _round_up(regs * lim.warp_size, lim.register_alloc_unit)
    assumed = per_warp * _round_up(warps, partitions)
    fits = ((assumed <= lim.max_registers_per_block) & (per_warp * warps <= lim.max_registers_per_block)
            & (regs <= lim.max_registers_per_thread))
    per_partition = (lim.registers_per_sm // partitions) // np.maximum(per_warp, 1)
    blocks = np.where(per_warp > 0, per_partition * partitions // warps, NO_LIMIT)
    return np.where(fits, blocks, 0)


def _smem_per_block(smem: np.ndarray, lim: OccupancyLimits) -> np.ndarray:
    # cudaOccMaxBlocksPerSMSmemLimit: static + dynamic + the driver's reserved bytes (1 KiB from cc 8.0),
    # rounded up to the allocation granularity.
    return _round_up(smem + lim.reserved_shared_mem_per_block_bytes, lim.shared_mem_alloc_unit_bytes)


def _by_shared_mem(smem: np.ndarray, lim: OccupancyLimits) -> np.ndarray:
    alloc = _smem_per_block(smem, lim)
    # cudaOccSMemPerBlock: the per-block cap (opt-in here) plus the reserved bytes, which count against it.
    cap = lim.shared_mem_per_block_optin_bytes + lim.reserved_shared_mem_per_block_bytes
    # Default carveout preference = all of sharedMemPerMultiprocessor (cudaOccSMemPreferenceVoltaPlus).
    blocks = np.where(alloc > 0, lim.shared_mem_per_sm_bytes // np.maximum(alloc, 1), NO_LIMIT)
    return np.where(alloc > cap, 0, blocks)


def _limits(threads_per_block: np.ndarray, registers_per_thread: np.ndarray, shared_mem_bytes: np.ndarray,
            lim: OccupancyLimits) -> np.ndarray:
    """Blocks per SM allowed by each limit, shape (4, n) in ``LIMITERS`` order."""
    t, r, s = _inputs(threads_per_block, registers_per_thread, shared_mem_bytes)
    regs = _by_registers(t, r, lim, lim.warp_alloc_granularity)
    if lim.compute_capability == "6.0":
        # cuda_occupancy.h: GP100 has 2 sub-partitions but GP10x 4; for forward compatibility within
        # Pascal a block that cannot run on GP10x is not allowed to run on GP100 either.
        regs = np.where(_by_registers(t, r, lim, 4) == 0, 0, regs)
    blocks = np.full(t.shape, lim.max_blocks_per_sm, dtype=np.int64)
    return np.stack([_by_warps(t, lim), regs, _by_shared_mem(s, lim), blocks]).reshape(4, -1)


def blocks_per_sm(threads_per_block: np.ndarray, registers_per_thread: np.ndarray,
                  shared_mem_bytes: np.ndarray, limits: OccupancyLimits) -> np.ndarray:
    """Resident blocks per SM (int64, >= 0); 0 when one block cannot fit at all."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (threads_per_block, registers_per_thread,
                                                        shared_mem_bytes)))
    per = _limits(threads_per_block, registers_per_thread, shared_mem_bytes, limits)
    return per.min(axis=0).reshape(shape)


def cdna_blocks_per_cu(threads_per_block: np.ndarray, registers_per_thread: np.ndarray,
                       shared_mem_bytes: np.ndarray, limits: OccupancyLimits) -> np.ndarray:
    """Resident workgroups per CU on AMD CDNA, from an OccupancyLimits whose CUDA names mean wavefront (warp),
    workgroup (block), CU (SM) and LDS (shared memory): the same waves, LDS and register rules, with LLVM's
    workgroup limit (AMDGPUBaseInfo.cpp, getMaxWorkGroupsPerCU): a workgroup of one wave needs no barrier, so
    those are limited by waves alone; multi-wave workgroups by ``max_blocks_per_sm`` (16 barriers)."""
    blocks = blocks_per_sm(threads_per_block, registers_per_thread, shared_mem_bytes, limits)
    one_wave = np.asarray(threads_per_block) <= limits.warp_size
    wide = blocks_per_sm(threads_per_block, registers_per_thread, shared_mem_bytes,
                         replace(limits, max_blocks_per_sm=limits.max_warps_per_sm))
    return np.where(one_wave, wide, blocks)


def occupancy(threads_per_block: np.ndarray, registers_per_thread: np.ndarray,
              shared_mem_bytes: np.ndarray, limits: OccupancyLimits) -> np.ndarray:
    """Theoretical occupancy: resident warps / max warps per SM (float64 in [0, 1])."""
    n = blocks_per_sm(threads_per_block, registers_per_thread, shared_mem_bytes, limits)
    warps = _warps_per_block(np.asarray(threads_per_block, dtype=np.int64), limits)
    return (n * warps / limits.max_warps_per_sm).astype(np.float64)


def carveout_bytes(threads_per_block: np.ndarray, registers_per_thread: np.ndarray,
                   shared_mem_bytes: np.ndarray, limits: OccupancyLimits) -> np.ndarray:
    """Shared-memory carveout the driver picks by default: the smallest configurable size that holds
    the resident blocks' shared memory (int64 bytes; the largest when no block fits)."""
    n = blocks_per_sm(threads_per_block, registers_per_thread, shared_mem_bytes, limits)
    s = np.broadcast_to(np.asarray(shared_mem_bytes, dtype=np.int64), n.shape)
    need = np.where(n > 0, n * _smem_per_block(s, limits), limits.shared_mem_per_sm_bytes)
    steps = np.asarray(sorted(limits.shared_mem_carveout_kib), dtype=np.int64) * KIB
    # cudaOccAlignUpShmemSizeVoltaPlus: the next carveout step at or above the need.
    return steps[np.minimum(np.searchsorted(steps, need, side="left"), len(steps) - 1)]


def waves(blocks: np.ndarray, blocks_per_sm: np.ndarray, sms: int | np.ndarray) -> np.ndarray:
    """Fractional waves: blocks / (blocks per SM x SMs); take ``ceil`` for whole waves.

    ``blocks_per_sm == 0`` (our rules say no block fits, yet the trace shows the kernel ran: e.g. a
    resource the limits table gets wrong) counts as 1 block per SM, so the kernel still has waves."""
    per_sm = np.maximum(np.asarray(blocks_per_sm, dtype=np.int64), 1)
    return np.asarray(blocks, dtype=np.float64) / (per_sm * np.asarray(sms, dtype=np.float64))

"""Occupancy calculator (habitat_trace.scale.occupancy) against NVIDIA's rules and CUPTI's numbers.

(a) golden cases: worked examples (CUDA C Best Practices Guide) and hand-derived cases, plus 4,000 random
    launches whose answers come from NVIDIA's cuda_occupancy.h itself (tests/data/cuda_occupancy/);
(b) real traces: Kineto's "est. achieved occupancy %" reproduced kernel by kernel;
(c) hypothesis properties: occupancy within every limit, monotone in registers and shared memory.
"""
from __future__ import annotations

import csv
import dataclasses
import tomllib
from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.scale.gpu import OccupancyLimits
from habitat_trace.scale.occupancy import LIMITERS, _limits, blocks_per_sm, carveout_bytes, occupancy, waves
from tests.conftest import DATA, TRACES, needs_shared

NONE_FITS = "none-fits"


def limiter(threads_per_block: np.ndarray, registers_per_thread: np.ndarray, shared_mem_bytes: np.ndarray,
            limits: OccupancyLimits) -> np.ndarray:
    """Name of the binding limit per kernel (a check of the golden cases, which name it): one of ``LIMITERS`` or
    ``"none-fits"`` (0 blocks). Ties go to the first in ``LIMITERS`` (cuda_occupancy.h's limitingFactors bits)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (threads_per_block, registers_per_thread, shared_mem_bytes)))
    per = _limits(threads_per_block, registers_per_thread, shared_mem_bytes, limits)
    names = np.array(LIMITERS, dtype=object)[per.argmin(axis=0)]
    return np.where(per.min(axis=0) == 0, NONE_FITS, names).astype(str).reshape(shape)


LIMITS_TOML = DATA / "occupancy_limits.toml"
GOLDEN_CSV = DATA / "cuda_occupancy" / "golden.csv"
KIB = 1024
# Kineto asks the calculator with FUNC_SHMEM_LIMIT_DEFAULT, i.e. cudaDeviceProp.sharedMemPerBlock (48 KiB
# on every cc here) as the per-block cap, not the opt-in one.
KINETO_SMEM_PER_BLOCK = 48 * KIB
# Observed: 31,694 of 31,694 kernels (all 18 H100 + H200 traces) match to the integer percent.
MIN_CUPTI_AGREEMENT = 0.99


@cache
def limits(cc: str) -> OccupancyLimits:
    table = tomllib.loads(LIMITS_TOML.read_text())["occupancy"][cc]
    names = {f.name for f in dataclasses.fields(OccupancyLimits)} - {"compute_capability", "source"}
    kw = {k: v for k, v in table.items() if k in names}
    kw["shared_mem_carveout_kib"] = tuple(kw["shared_mem_carveout_kib"])
    return OccupancyLimits(compute_capability=cc, source=str(LIMITS_TOML.name), **kw)


ALL_CCS = tuple(tomllib.loads(LIMITS_TOML.read_text())["occupancy"])


# --- (a) golden cases ------------------------------------------------------------------------------

# cc, threads, registers, shared memory bytes -> blocks per SM, binding limit, occupancy; why.
GOLDEN = [
    # CUDA C Best Practices Guide, "Calculating Occupancy": cc 7.0, 37 registers: 128-thread blocks give
    # 75% (12 blocks), 320-thread blocks "63%" (4 blocks = 40 of 64 warps). 37*32 -> 1280 per warp,
    # 16384 registers per sub-partition hold 12 warps, x4 = 48 warps.
    ("7.0", 128, 37, 0, 12, "registers", 0.75),
    ("7.0", 320, 37, 0, 4, "registers", 0.625),
    # GP100 has 2 sub-partitions of 32768 registers: 64 regs -> 2048 per warp -> 16 warps each -> 32.
    ("6.0", 256, 64, 0, 4, "registers", 0.5),
    # GP100 alone fits one 22-warp block at 88 registers (11 warps per half), but 4 sub-partitions
    # (GP10x) round 22 warps up to 24 x 2816 > 65536 registers, and cuda_occupancy.h refuses on GP100 too.
    ("6.0", 704, 88, 0, 0, NONE_FITS, 0.0),
    # Turing: 1024 threads per SM, so one 1024-thread block fills it.
    ("7.5", 1024, 32, 0, 1, "warps", 1.0),
    # cc 8.0: 48 KiB + 1 KiB reserved = 50176 B per block; 164 KiB per SM holds 3.
    ("8.0", 256, 0, 48 * KIB, 3, "shared_mem", 0.375),
    # Registers unknown (0): no register limit, warps bind (2 x 32 of 64 warps).
    ("8.0", 1024, 0, 0, 2, "warps", 1.0),
    # cc 8.6: 48 warps per SM -> 12 four-warp blocks; 16 blocks per SM cap for one-warp blocks.
    ("8.6", 128, 32, 0, 12, "warps", 1.0),
    ("8.6", 32, 16, 0, 16, "blocks", 16 / 48),
    # cc 9.0, an nvjet GEMM from the H100 traces: 168 regs -> 5376 per warp, 3 warps per sub-partition ->
    # 12 warps = 1 block; its 213204 B (+1 KiB, to 128 B) also allow only 1: a tie, reported as registers.
    ("9.0", 384, 168, 213204, 1, "registers", 12 / 64),
    ("9.0", 1025, 32, 0, 0, NONE_FITS, 0.0),  # over maxThreadsPerBlock
    ("9.0", 128, 32, 227 * KIB, 1, "shared_mem", 4 / 64),  # exactly the opt-in maximum
    ("9.0", 128, 32, 227 * KIB + 1, 0, NONE_FITS, 0.0),  # one byte over
]


@pytest.mark.parametrize("cc,threads,regs,smem,blocks,binding,occ", GOLDEN)
def test_golden_cases(cc: str, threads: int, regs: int, smem: int, blocks: int, binding: str,
                      occ: float) -> None:
    lim = limits(cc)
    args = (np.array([threads]), np.array([regs]), np.array([smem]), lim)
    assert blocks_per_sm(*args).tolist() == [blocks]
    assert limiter(*args).tolist() == [binding]
    assert occupancy(*args) == pytest.approx([occ])


def _golden_rows() -> list[dict[str, str]]:
    with GOLDEN_CSV.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


@pytest.mark.parametrize("cc", sorted({r["cc"] for r in _golden_rows()}))
def test_matches_cuda_occupancy_h(cc: str) -> None:
    rows = [r for r in _golden_rows() if r["cc"] == cc]
    t, r, s, want = (np.array([int(row[k]) for row in rows]) for k in
                     ("threads", "registers", "shared_mem", "blocks"))
    got = blocks_per_sm(t, r, s, limits(cc))
    # The header lets cc >= 7 use 256 registers per thread; the Programming Guide (and our table) say
    # 255, and no compiled kernel uses 256, so there we answer 0 where the header may not.
    differ = r > limits(cc).max_registers_per_thread
    assert (got[differ] == 0).all()
    np.testing.assert_array_equal(got[~differ], want[~differ])


def test_carveout_is_the_smallest_that_holds_the_blocks() -> None:
    lim = limits("8.0")
    # 3 blocks x 50176 B = 147 KiB -> the 164 KiB step; 2 blocks x the 1 KiB reserve -> the 8 KiB step.
    got = carveout_bytes(np.array([256, 1024]), np.array([0, 0]), np.array([48 * KIB, 0]), lim)
    assert got.tolist() == [164 * KIB, 8 * KIB]


def test_waves_and_shapes() -> None:
    assert waves(np.array([264, 1, 100]), np.array([2, 0, 1]), 132).tolist() == pytest.approx(
        [1.0, 1 / 132, 100 / 132])  # blocks_per_sm 0 counts as 1: the kernel did run
    assert waves(np.array([10]), np.array([1]), np.array([5])).tolist() == [2.0]
    lim = limits("9.0")
    assert blocks_per_sm(np.array([[128, 256]]), 32, 0, lim).shape == (1, 2)  # broadcasts like numpy
    assert blocks_per_sm(np.array([], dtype=np.int64), np.array([]), np.array([]), lim).shape == (0,)
    with pytest.raises(ValueError, match="threads_per_block"):
        blocks_per_sm(np.array([0]), np.array([32]), np.array([0]), lim)


# --- (b) CUPTI's numbers in the shared traces --------------------------------------------------------

def _kineto_estimate(threads: np.ndarray, regs: np.ndarray, smem: np.ndarray, grid: np.ndarray,
                     sms: int, lim: OccupancyLimits) -> np.ndarray:
    """Kineto's "est. achieved occupancy %" (libkineto CuptiActivity / kernelOccupancy): the calculator's
    active blocks, capped by the grid's blocks per SM, as threads / maxThreadsPerMultiprocessor, rounded."""
    default_cap = dataclasses.replace(lim, shared_mem_per_block_optin_bytes=KINETO_SMEM_PER_BLOCK)
    active = np.minimum(grid / sms, blocks_per_sm(threads, regs, smem, default_cap))
    return np.floor(0.5 + active * threads / lim.max_threads_per_sm * 100.0)


def _traces() -> list[str]:
    return sorted(str(p.relative_to(TRACES)) for d in ("h100-sxm", "h200-sxm") if (TRACES / d).is_dir()
                  for p in (TRACES / d).glob("*.pt.trace.json.gz"))


@needs_shared
@pytest.mark.parametrize("name", _traces())
def test_reproduces_cupti_estimated_occupancy(name: str) -> None:
    trace = load(TRACES / name)
    k = trace.gpu[trace.gpu[S.CAT] == S.CAT_KERNEL]
    props = trace.device_properties
    lim = limits(f"{props['computeMajor']}.{props['computeMinor']}")
    sms = int(props["numSms"])
    threads = (k[S.BLOCK_X] * k[S.BLOCK_Y] * k[S.BLOCK_Z]).to_numpy()
    grid = (k[S.GRID_X] * k[S.GRID_Y] * k[S.GRID_Z]).to_numpy()
    regs, smem = k[S.REGISTERS].to_numpy(), k[S.SHARED_MEM].to_numpy()
    cupti = k[S.CUPTI_OCCUPANCY].to_numpy()

    # "blocks per SM" in the trace is grid / numSms, not occupancy.
    np.testing.assert_allclose(k[S.CUPTI_BLOCKS_PER_SM], grid / sms, rtol=1e-4, atol=1e-6)
    # Kineto's zeros are not "no occupancy": kernels above 48 KiB of shared memory (the Hopper GEMM and
    # attention kernels, the ones launched with clusters) fail its 48 KiB default cap, and grids of a few
    # blocks round below 0.5%. With the opt-in cap every kernel that ran fits.
    agreement = float(np.mean(_kineto_estimate(threads, regs, smem, grid, sms, lim) == cupti))
    print(f"{name}: {len(cupti)} kernels, agreement with CUPTI {agreement:.2%}")
    assert agreement >= MIN_CUPTI_AGREEMENT
    assert (blocks_per_sm(threads, regs, smem, lim) > 0).all()


# --- (c) properties ---------------------------------------------------------------------------------

launches = st.tuples(st.sampled_from(ALL_CCS), st.integers(1, 1024), st.integers(0, 255),
                     st.integers(0, 240 * KIB))


@given(launches)
def test_occupancy_within_every_limit(launch: tuple[str, int, int, int]) -> None:
    cc, threads, regs, smem = launch
    lim = limits(cc)
    n = int(blocks_per_sm(np.array([threads]), np.array([regs]), np.array([smem]), lim)[0])
    warps = -(-threads // lim.warp_size)
    assert 0 <= n <= lim.max_blocks_per_sm
    assert n * threads <= lim.max_threads_per_sm
    assert n * warps <= lim.max_warps_per_sm
    reg_unit = lim.register_alloc_unit
    assert n * warps * (-(-regs * lim.warp_size // reg_unit) * reg_unit) <= lim.registers_per_sm
    smem_unit = lim.shared_mem_alloc_unit_bytes
    smem_block = -(-(smem + lim.reserved_shared_mem_per_block_bytes) // smem_unit) * smem_unit
    assert n * smem_block <= lim.shared_mem_per_sm_bytes
    if n:
        assert smem_block * n <= int(carveout_bytes(threads, regs, smem, lim)) <= lim.shared_mem_per_sm_bytes
    name = str(limiter(np.array([threads]), np.array([regs]), np.array([smem]), lim)[0])
    assert name == NONE_FITS if n == 0 else name in LIMITERS
    assert 0.0 <= float(occupancy(threads, regs, smem, lim)) <= 1.0


@given(launches, st.integers(0, 64), st.integers(0, 64 * KIB))
def test_more_registers_or_shared_memory_never_more_blocks(launch: tuple[str, int, int, int],
                                                          more_regs: int, more_smem: int) -> None:
    cc, threads, regs, smem = launch
    lim = limits(cc)
    base = blocks_per_sm(threads, regs, smem, lim)
    assert blocks_per_sm(threads, min(regs + more_regs, 255), smem, lim) <= base
    assert blocks_per_sm(threads, regs, smem + more_smem, lim) <= base

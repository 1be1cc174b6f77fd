"""Per-kernel facts the laws read: the op's FLOPs and bytes, the pipe, waves, achievable bandwidth, γ (``kernel_facts``),
and the helpers that build them from the ingest tables (time shares in an op, GEMM shapes, name patterns).

Pure functions of the ingest tables and two GpuSpecs; scale/engine.py, scale/vendor.py and the analyses read them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

import numpy as np
import pandas as pd

from habitat_trace.ingest import classify as K
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import KernelTables as Tables
from habitat_trace.ingest.trace import derived
from habitat_trace.scale import crossarch, occupancy, wave
from habitat_trace.scale.cost import attention_tiles as cost_attention_tiles
from habitat_trace.scale.cost import gemm_dims, in_place_write_bytes, op_cost, tensor_dtype_from_kernel
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.prediction import KernelFacts

LAUNCH_KEY = (S.NAME, S.GRID_X, S.GRID_Y, S.GRID_Z, S.BLOCK_X, S.BLOCK_Y, S.BLOCK_Z)  # a kernel's launch (_twins)

T = TypeVar("T")

# γ when an op's shapes were not recorded (no record_shapes, TensorList arguments): streaming kernels
# are mostly bandwidth-bound, library kernels mostly not. Assumptions, not fits: docs/method.md step 4.
STREAMING_GAMMA_WITHOUT_SHAPES = 0.8
LIBRARY_GAMMA_WITHOUT_SHAPES = 0.2
# Without valid grid/block, kernel_facts assumes MANY_WAVES_GRID blocks: the compute side scales by the SM count and
# per-SM peak, the memory side by the achievable bandwidth (engine.NO_PARAMS_REASON says so per kernel).
MANY_WAVES_GRID = 1e6
# Kernels that schedule their tiles over the SMs they get (cuBLAS nvjet, CUTLASS persistent /
# warp-specialized / stream-K, Triton persistent matmuls): fractional waves.
PERSISTENT_KERNELS = r"(?i)nvjet|persistent|warpspecialized|stream_?k|_coop"
# bytes per element of each pipe's operands (FP4 packs two per byte; TF32 is stored as FP32)
ELEMENT_BYTES = {"fp4": 0.5, "fp8": 1.0, "bf16": 2.0, "fp16": 2.0, "tf32": 4.0, "fp32": 4.0, "matrix-fp32": 4.0}


def twins(trace: Tables) -> np.ndarray:
    """Per GPU event, the row whose op facts (FLOPs, bytes, pipe, GEMM shape) it takes: itself, or, for a kernel with
    no op in the trace, the same kernel (name, grid and block) of the row with an op nearest to it in origin time;
    itself where there is none. Built once per trace (Tables.derived), read-only.

    Why: a GPU-bound loop launches a step ahead of its GPU, so the kernels that run when the profiling window opens
    were launched before it: Kineto records them, but not their launches or ops (Lambda's BERT-base TF32 step at
    batch 172 on an H100: 1,015 kernels, 270 ms). A training loop repeats its kernels, so each has a twin in the window,
    launched with the same grid and block by the same op; without it the class defaults priced them (the B200
    replayed that backlog 1.13x faster where its twins ran 1.8-2.2x, and the first step's sync waited for it)."""
    return derived(trace, _twins)


def _twins(trace: Tables) -> np.ndarray:
    g = trace.gpu
    n = len(g)
    src = np.arange(n)
    op = g[S.OP].to_numpy()
    lone = op < 0
    if not lone.any() or lone.all():
        src.setflags(write=False)
        return src
    code = _launch_codes(g)
    dur = g[S.DUR].to_numpy().astype(np.int64)
    span = int(dur.max()) + 1
    known = np.flatnonzero(~lone)
    order = known[np.lexsort((dur[known], code[known]))]
    composite = code[order] * span + dur[order]  # sorted: by kernel, then by origin time
    want = np.flatnonzero(lone)
    first = np.searchsorted(composite, code[want] * span, "left")
    last = np.searchsorted(composite, (code[want] + 1) * span, "left") - 1
    at = np.searchsorted(composite, code[want] * span + dur[want], "left")
    below, above = np.clip(at - 1, first, last), np.clip(at, first, last)
    pick = np.where(np.abs(dur[order[np.maximum(below, 0)]] - dur[want])
                    <= np.abs(dur[order[np.maximum(above, 0)]] - dur[want]), below, above)
    has = first <= last
    src[want[has]] = order[pick[has]]
    src.setflags(write=False)
    return src


def gemm_kernel_shapes(trace: Tables, where: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GEMM kernels (rows of ``trace.gpu`` where ``where`` holds) whose launching op recorded GEMM shapes: their
    rows, (B, M, N, K) as a 4 x n float array, and the op's compute dtype from its input types (a CUDA-core
    kernel of a bf16 op is not an FP32 GEMM)."""
    g, ops = trace.gpu, trace.ops
    op = g[S.OP].to_numpy()
    cand = where & (g[S.KCLASS].to_numpy() == K.GEMM) & (op >= 0) & (g[S.CAT] == S.CAT_KERNEL).to_numpy()
    names, dims, types = ops[S.NAME].to_numpy(), ops[S.INPUT_DIMS].to_numpy(), ops[S.INPUT_TYPES].to_numpy()
    def of(o: int) -> tuple[tuple[int, int, int, int], str] | None:
        bmnk = gemm_dims(str(names[o]), dims[o])
        return None if bmnk is None else (bmnk, op_cost(str(names[o]), dims[o], types[o], None)[2])
    found_by_op = per_op(np.where(cand, op, -1), of, (names, dims, types))
    shape = {o: v for o, v in found_by_op.items() if v is not None}
    rows = np.flatnonzero(cand & np.isin(op, list(shape)))
    # a GEMM kernel without its op takes its twin's shape (twins)
    src = twins(trace)
    twin = where & (src != np.arange(len(g)))  # only a kernel without its op has another row as its twin
    twin[twin] = np.isin(src[twin], rows)
    rows = np.union1d(rows, np.flatnonzero(twin))
    found = [shape[o] for o in op[src[rows]].tolist()]
    return (rows, np.array([s for s, _ in found], dtype=np.float64).reshape(-1, 4).T,
            np.array([d for _, d in found], dtype=object))



def scale_factors(g: pd.DataFrame, waves_origin: np.ndarray, waves_target: np.ndarray, bw_origin: np.ndarray,
                  bw_target: np.ndarray, rate_ratio: np.ndarray, width: np.ndarray | float = 1.0,
                  shapes: Optional["TraceShapes"] = None) -> tuple[np.ndarray, np.ndarray]:
    """Memory-side and compute-side factors F_m, F_c per GPU event (docs/method.md steps 2-3); ``shapes``: the
    trace's TraceShapes when the caller has them (else read from ``g``)."""
    # a kernel run in a wider dtype on the target (GpuSpec.tensor_pipe) moves its operands at that width
    f_mem = bw_origin / bw_target * width
    # a library kernel whose grid fits one wave on the origin was sized to that GPU's SMs: the library
    # loops over tiles inside it (or picks a grid for the target's SMs there), so its waves are fractional
    gemm_or_attention = (shapes.gemm_or_attention if shapes is not None
                         else np.isin(g[S.KCLASS].to_numpy(), (K.GEMM, K.ATTENTION)))
    named = shapes.persistent_name if shapes is not None else name_matches(g[S.NAME], PERSISTENT_KERNELS)
    persistent = named | (gemm_or_attention & (waves_origin <= 1.0))
    f_comp = wave.wave_factor(waves_origin, waves_target, persistent) * rate_ratio
    return f_mem, f_comp


@dataclass(frozen=True)
class TraceShapes:
    """What kernel_facts and engine.cross_chip_work read of the trace alone, the same for every origin and target:
    built once per trace (Tables.derived), arrays read-only."""

    has_params: np.ndarray
    threads: np.ndarray  # per block, 1 where the launch parameters are missing
    regs: np.ndarray
    smem: np.ndarray
    blocks: np.ndarray  # MANY_WAVES_GRID where the launch parameters are missing
    share: np.ndarray  # time_share_in_op(g)
    share_all: np.ndarray  # time_share_in_op(g, library_only=False)
    t_origin: np.ndarray  # ns, float
    gemm: np.ndarray
    gemm_or_attention: np.ndarray
    persistent_name: np.ndarray  # name_matches(PERSISTENT_KERNELS)
    library: np.ndarray  # a library kernel (K.LIBRARY_CLASSES: cuBLAS, cuDNN, flash attention)
    gamma_default: np.ndarray  # _gamma's class defaults
    helper: np.ndarray  # a non-library kernel of a library op


def trace_shapes(trace: Tables) -> TraceShapes:
    return derived(trace, _trace_shapes)


def _trace_shapes(trace: Tables) -> TraceShapes:
    g = trace.gpu
    blocks = (g[S.GRID_X] * g[S.GRID_Y] * g[S.GRID_Z]).to_numpy().astype(np.float64)
    threads = (g[S.BLOCK_X] * g[S.BLOCK_Y] * g[S.BLOCK_Z]).to_numpy()
    has_params = (blocks > 0) & (threads > 0)
    kclass, op = g[S.KCLASS].to_numpy(), g[S.OP].to_numpy()
    library = np.isin(kclass, K.LIBRARY_CLASSES)
    op_cls = pd.Series(library).groupby(op).transform("any").to_numpy()
    out = TraceShapes(
        has_params=has_params, threads=np.where(has_params, threads, 1),
        # ROCm traces record no registers (-1): no register limit, as the CUDA rules read 0
        regs=np.maximum(g[S.REGISTERS].to_numpy(), 0), smem=g[S.SHARED_MEM].to_numpy(),
        # without launch parameters assume a kernel that fills many waves (NO_PARAMS_REASON)
        blocks=np.where(has_params, blocks, MANY_WAVES_GRID), share=time_share_in_op(g),
        share_all=time_share_in_op(g, library_only=False),
        t_origin=g[S.DUR].to_numpy().astype(np.float64), gemm=(g[S.KCLASS] == K.GEMM).to_numpy(),
        gemm_or_attention=np.isin(kclass, (K.GEMM, K.ATTENTION)), persistent_name=name_matches(g[S.NAME],
                                                                                             PERSISTENT_KERNELS),
        library=library, gamma_default=np.where(library, LIBRARY_GAMMA_WITHOUT_SHAPES, STREAMING_GAMMA_WITHOUT_SHAPES),
        helper=op_cls & ~library & (op >= 0))
    for a in vars(out).values():
        a.setflags(write=False)
    return out



def _launch_codes(g: pd.DataFrame) -> np.ndarray:
    """A code per GPU row, equal where the kernel is the same (name, grid and block); int64. The names are factorized
    as objects, then each launch parameter's codes paired with the codes so far and numbered again (a hash of int64s):
    issue 34's 118k GPU rows in 0.07-0.08 s against 0.18-0.23 s for pd.factorize of a MultiIndex, which builds a tuple
    per row (one process, 2026-11-27). Which number a kernel gets does not matter to _twins (it groups by it), only
    that equal keys get equal numbers; a null name keeps the MultiIndex path, whose grouping of nulls is pandas' own."""
    names = g[S.NAME].to_numpy(dtype=object)
    if pd.isna(names).any():
        key = pd.MultiIndex.from_arrays([g[c] for c in LAUNCH_KEY])
        return pd.factorize(key)[0].astype(np.int64)
    code = pd.factorize(names)[0].astype(np.int64)
    for c in LAUNCH_KEY[1:]:  # the pairs (codes so far, this column's code) numbered again: small, never past int64
        col, uniq = pd.factorize(g[c].to_numpy(dtype=np.int64))
        code = pd.factorize(code * len(uniq) + col)[0].astype(np.int64)
    return code


def per_name(names: pd.Series, of: Callable[[str], Any], missing: Any) -> np.ndarray:
    """``of(name)`` for every event, computed once per distinct name (a few hundred kernel names repeat over a million
    events); ``missing`` where the name is."""
    # an object array hashes 2x faster than the "str" column itself (pandas' python-backed strings)
    codes, uniques = pd.factorize(names.to_numpy(dtype=object))
    values = np.array([of(str(u)) for u in uniques] + [missing])
    return values[codes]  # code -1 (a missing name) picks the appended ``missing``


def name_matches(names: pd.Series, pattern: str) -> np.ndarray:
    """``names.str.contains(pattern)`` as a bool array, the regex run once per distinct name."""
    rx = re.compile(pattern)  # what str.contains(regex=True) runs on each
    return per_name(names, lambda n: rx.search(n) is not None, False).astype(bool)



def kernel_facts(trace: Tables, origin: GpuSpec, target: GpuSpec) -> KernelFacts:
    sh = trace_shapes(trace)
    thr, regs, smem, blocks = sh.threads, sh.regs, sh.smem, sh.blocks
    bps_o = np.maximum(_blocks_per_sm(thr, regs, smem, origin), 1)
    bps_t = np.maximum(_blocks_per_sm(thr, regs, _fit_smem(smem, target), target), 1)
    w_o = occupancy.waves(blocks, bps_o, origin.sms)
    w_t = occupancy.waves(blocks, bps_t, target.sms)
    eff_o, eff_t = crossarch.dram_efficiencies(origin, target)
    bw_o = wave.achievable_bandwidth_gbs(origin.sms, origin.boost_clock_mhz, origin.memory_bandwidth_gbs,
                                         np.minimum(w_o, 1.0), eff_o)
    bw_t = wave.achievable_bandwidth_gbs(target.sms, target.boost_clock_mhz, target.memory_bandwidth_gbs,
                                         np.minimum(w_t, 1.0), eff_t)
    flops, nbytes, pipe = costs(trace)
    # per distinct pipe (a few), not per kernel
    kinds = list(dict.fromkeys(pipe))
    peak_of_o = {p: origin.pipe_peak_tflops(p) for p in kinds}
    peak_of_t = {p: target.pipe_peak_tflops(p) for p in kinds}
    to_t = {p: p if p == "fp32" else target.tensor_pipe(p) for p in kinds}
    peak_o = np.array([peak_of_o[p] for p in pipe])
    peak_t = np.array([peak_of_t[p] for p in pipe])
    pipe_t = np.array([to_t[p] for p in pipe], dtype=object)
    wide = {p: ELEMENT_BYTES.get(to_t[p], 4.0) / ELEMENT_BYTES.get(p, 4.0) for p in kinds}
    width = np.array([wide[p] for p in pipe])
    rate_ratio = (peak_o / origin.sms) / (peak_t / target.sms)
    gamma = _gamma_of(sh, nbytes, bw_o)
    # lower bound on the target for the op's share of work: FLOPs at peak, bytes at DRAM bandwidth
    share = sh.share
    floor_t = share * wave.roofline_ns(flops, nbytes * width, peak_t, target.memory_bandwidth_gbs)
    floor_o = share * wave.roofline_ns(flops, nbytes, peak_o, origin.memory_bandwidth_gbs)
    # where the origin ran faster than its own roofline estimate, the estimate is off (wrong shapes or
    # dtype): no bound then
    t_o = sh.t_origin
    floor = np.where(t_o >= floor_o, floor_t, np.nan)
    # share of the origin time the op's FLOPs needed at the pipe's peak, for GEMM kernels only: a GEMM op
    # is its GEMM kernel(s), while conv and attention ops split their FLOPs over helper kernels (cuDNN
    # wgrad reductions, layout transforms, softmax statistics) whose time share says nothing of FLOPs
    # (unknown FLOPs stay NaN: wave.combine reads NaN as 0 and clips to [0, 1])
    flop_share = np.where(sh.gemm, share * flops / (peak_o * 1e3) / np.maximum(t_o, 1.0), 0.0)
    # more FLOPs than the pipe could issue in the measured time: the op's shapes do not describe this kernel
    # (a wrong op link or dtype), so neither its FLOPs nor its bytes say anything; class defaults instead.
    # Otherwise the round trip is lopsided: u clipped to 1 hides the DRAM term one way (F_m < 1), the
    # bytes' γ wins the max the other way (F_m > 1). Never the case on the shared or collected traces.
    off = flop_share > 1.0
    flop_share = np.where(off, 0.0, flop_share)
    gamma = np.where(off, LIBRARY_GAMMA_WITHOUT_SHAPES, gamma)
    src = twins(trace)  # a kernel without its op takes its twin's op facts (launch parameters are its own)
    gamma, flop_share, floor, rate_ratio, width = (a[src] for a in (gamma, flop_share, floor, rate_ratio, width))
    f_mem, f_comp = scale_factors(trace.gpu, w_o, w_t, bw_o, bw_t, rate_ratio, width, shapes=sh)
    return KernelFacts(has_params=sh.has_params.copy(), pipe=np.array(pipe, dtype=object)[src], waves_origin=w_o,
                       waves_target=w_t, bw_origin=bw_o, bw_target=bw_t, rate_ratio=rate_ratio, gamma=gamma,
                       flop_share=flop_share, roofline_floor_ns=floor, f_mem=f_mem, f_comp=f_comp,
                       pipe_target=pipe_t[src], width=width, flops=(share * flops)[src], nbytes=(share * nbytes)[src])


def blocks_per_sm_on(threads: np.ndarray, regs: np.ndarray, smem: np.ndarray, spec: GpuSpec) -> np.ndarray:
    """Resident blocks per SM (CU) on ``spec``: CUDA's occupancy rules, or CDNA's for an AMD GPU."""
    return _blocks_per_sm(threads, regs, smem, spec)


def _blocks_per_sm(threads: np.ndarray, regs: np.ndarray, smem: np.ndarray, spec: GpuSpec) -> np.ndarray:
    if spec.vendor == "amd":
        return occupancy.cdna_blocks_per_cu(threads, regs, smem, spec.occupancy)
    return occupancy.blocks_per_sm(threads, regs, smem, spec.occupancy)


def _fit_smem(smem: np.ndarray, target: GpuSpec) -> np.ndarray:
    # a kernel compiled for a bigger SM is rebuilt with tiles that fit the target's opt-in limit
    return np.minimum(smem, target.occupancy.shared_mem_per_block_optin_bytes)


def costs(trace: Tables) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per GPU event: its op's FLOPs and bytes (NaN unknown) and the pipe (tensor dtype or fp32); built once per
    trace (Tables.derived: the same for every target), read-only."""
    return derived(trace, _costs)


def _costs(trace: Tables) -> tuple[np.ndarray, np.ndarray, list[str]]:
    g, ops = trace.gpu, trace.ops
    op = g[S.OP].to_numpy()
    # columns as arrays once: a DataFrame lookup per op cost 30 µs each on a 1M-event trace
    names, dims, types = ops[S.NAME].to_numpy(), ops[S.INPUT_DIMS].to_numpy(), ops[S.INPUT_TYPES].to_numpy()
    concrete = ops[S.CONCRETE_INPUTS].to_numpy() if S.CONCRETE_INPUTS in ops else None
    cache = per_op(op, lambda o: op_cost(str(names[o]), dims[o], types[o], concrete[o] if concrete is not None else
                                         None), (names, dims, types) + ((concrete,) if concrete is not None else ()))
    unknown = (np.nan, np.nan, "fp32")
    costs = [cache.get(o, unknown) for o in op.tolist()]
    flops = np.array([c[0] for c in costs], dtype=np.float64)
    nbytes = np.array([c[1] for c in costs], dtype=np.float64)
    pipes = []
    library = np.isin(g[S.KCLASS].to_numpy(), K.LIBRARY_CLASSES)
    for (_, _, dtype), name, lib in zip(costs, g[S.NAME].tolist(), library.tolist()):
        if not lib:
            pipes.append("fp32")
            continue
        pipes.append(tensor_dtype_from_kernel(name, dtype) or "fp32")
    flops.setflags(write=False)
    nbytes.setflags(write=False)
    return flops, nbytes, pipes


def attention_tiles(trace: Tables) -> np.ndarray:
    """Per GPU event: the output tiles of its op where that is a fused attention op (cost.attention_tiles), else
    NaN; built once per trace, read-only."""
    return derived(trace, _attention_tiles)


def _attention_tiles(trace: Tables) -> np.ndarray:
    g, ops = trace.gpu, trace.ops
    # only attention kernels' ops are read (a million-event trace has a handful of them or none)
    op = np.where(g[S.KCLASS].to_numpy() == K.ATTENTION, g[S.OP].to_numpy(), -1)
    names, dims = ops[S.NAME].to_numpy(), ops[S.INPUT_DIMS].to_numpy()
    return per_event(op, per_op(op, lambda o: cost_attention_tiles(str(names[o]), dims[o]), (names, dims)), len(ops),
                     np.nan)


def per_event(op: np.ndarray, by_op: dict[int, float], n_ops: int, missing: float) -> np.ndarray:
    """A read-only float per event from ``per_op``'s values of its op, ``missing`` for an event whose op (``-1`` for
    none) has no value."""
    table = np.full(n_ops + 1, missing, dtype=np.float64)  # the last slot answers op -1 (no op)
    for o, v in by_op.items():
        table[o] = v
    out = table[np.where(op >= 0, op, n_ops)]
    out.setflags(write=False)
    return out


def per_op(op: np.ndarray, of: Callable[[int], T], columns: tuple[np.ndarray, ...]) -> dict[int, T]:
    """``of(o)`` for each op row ``o >= 0`` in ``op``, computed once per distinct combination of the op's
    ``columns`` values. ingest keeps one object for equal op names and shape lists (tables._shared: a step's shapes
    repeat every step), so the objects' identities find the ops that cost the same; ``of`` must be a pure function
    of those columns."""
    ops = np.unique(op[op >= 0])
    if not len(ops):
        return {}
    # each op's key as a row of its objects' ids; np.unique's first index of each key is the lowest op row that has
    # it, the one the loop over the ops computed before (0.35 s of Python a call on issue 34's 130k ops)
    ids = np.stack([np.fromiter(map(id, c[ops]), dtype=np.int64, count=len(ops)) for c in columns], axis=1)
    _, first, group = np.unique(ids, axis=0, return_index=True, return_inverse=True)
    values = [of(o) for o in ops[first].tolist()]
    return dict(zip(ops.tolist(), map(values.__getitem__, group.ravel().tolist())))


def in_place_bytes(trace: Tables) -> np.ndarray:
    """Per GPU event: the bytes its op writes back in place (cost.in_place_write_bytes; 0 for other ops and events
    without an op); built once per trace, read-only."""
    return derived(trace, _in_place_bytes)


def _in_place_bytes(trace: Tables) -> np.ndarray:
    g, ops = trace.gpu, trace.ops
    op = g[S.OP].to_numpy()
    names, dims, types = ops[S.NAME].to_numpy(), ops[S.INPUT_DIMS].to_numpy(), ops[S.INPUT_TYPES].to_numpy()
    per = per_op(op, lambda o: in_place_write_bytes(str(names[o]), dims[o], types[o]), (names, dims, types))
    return per_event(op, per, len(ops), 0.0)


def _gamma_of(sh: TraceShapes, nbytes: np.ndarray, bw_origin: np.ndarray) -> np.ndarray:
    """Share of a kernel's origin time the DRAM was busy: its share of the op's bytes over what the
    achievable bandwidth moves in that time (the 'achieved throughput against the roofline').
    A streaming kernel that reaches only half the bandwidth is half latency/issue-bound, and that
    half scales with the SM side, not with bandwidth. Class defaults where the shapes are unknown."""
    t = np.maximum(sh.t_origin, 1.0)
    used = sh.share_all * nbytes / (t * bw_origin)  # bytes / (ns * GB/s) = bytes / (ns * B/ns)
    # a helper kernel of a library op (layout transform, bias, cast) moves tensors the op's byte
    # count does not see (the library kernel re-reads them): it takes the streaming default
    used = np.where(sh.helper, np.nan, used)
    # more bytes than the DRAM could move in the measured time: the surplus hit in L2, so at most
    # 1/used of the traffic (and of the time) can have been DRAM-bound
    dram_share = np.where(used > 1.0, 1.0 / np.maximum(used, 1e-9), used)
    return np.where(np.isfinite(used), np.clip(dram_share, 0.0, 1.0), sh.gamma_default)


def time_share_in_op(g: pd.DataFrame, library_only: bool = True) -> np.ndarray:
    """Fraction of its op's (library-)kernel time each kernel took on the origin (splits the op's cost)."""
    lib = np.isin(g[S.KCLASS].to_numpy(), K.LIBRARY_CLASSES) | (not library_only)
    dur = np.where(lib, g[S.DUR].to_numpy(), 0).astype(np.float64)
    key = g[S.OP].to_numpy()
    total = pd.Series(dur).groupby(key).transform("sum").to_numpy()
    return np.where(total > 0, dur / np.maximum(total, 1), 0.0)

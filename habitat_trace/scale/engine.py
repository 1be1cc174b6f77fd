"""``predict(trace, origin, target) -> Prediction``: a duration and a method for every GPU event.

Pure function of the ingest tables and two GpuSpecs; reads no JSON, writes nothing.
Methods: identity (same GPU), copy (memcpy/memset), wave (kernels with launch parameters),
roofline-op (library GEMM/conv/attention/RNN kernels: wave law, then bounded below by the target's
roofline for the op's FLOPs and bytes), learned (FP32 GEMMs between two real GPUs inside the learned
model's trained range, scale/learned/envelope.py: its time ratio, roofline-bounded), sustained (FP32 GEMMs
across architectures: the GPUs' sustained rates, scale/crossarch.py), fallback (no launch parameters:
class-level rule). Between an NVIDIA and an AMD GPU one hook hands the kernels to scale/vendor.py
(roofline-op for library kernels, bandwidth for the rest).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from habitat_trace.ingest import classify as K
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import KernelTables as Tables
from habitat_trace.scale import collective, crossarch, learned, occupancy, vendor, wave
from habitat_trace.scale.cost import gemm_dims, gemm_flops_bytes, op_cost, tensor_dtype_from_kernel
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.learned import envelope
from habitat_trace.scale.prediction import (COPY, FALLBACK, IDENTITY, LEARNED, ROOFLINE_OP, SUSTAINED, WAVE,
                                            KernelFacts, Prediction)

# γ when an op's shapes were not recorded (no record_shapes, TensorList arguments): streaming kernels
# are mostly bandwidth-bound, library kernels mostly not. Assumptions, not fits: docs/method.md step 4.
STREAMING_GAMMA_WITHOUT_SHAPES = 0.8
LIBRARY_GAMMA_WITHOUT_SHAPES = 0.2
# What the engine does for a kernel without valid grid/block: kernel_facts assumes MANY_WAVES_GRID blocks, so the
# compute side scales by the SM count and per-SM peak, and the memory side by the achievable bandwidth.
NO_PARAMS_RULE = "wave law with a grid of many full waves assumed"
NO_PARAMS_REASON = f"no launch parameters (grid/block) in the trace: {NO_PARAMS_RULE}"
MANY_WAVES_GRID = 1e6
# Kernels that schedule their tiles over the SMs they get (cuBLAS nvjet, CUTLASS persistent /
# warp-specialized / stream-K, Triton persistent matmuls): fractional waves.
PERSISTENT_KERNELS = r"(?i)nvjet|persistent|warpspecialized|stream_?k|_coop"
# bytes per element of each pipe's operands (FP4 packs two per byte; TF32 is stored as FP32)
ELEMENT_BYTES = {"fp4": 0.5, "fp8": 1.0, "bf16": 2.0, "fp16": 2.0, "tf32": 4.0, "fp32": 4.0, "matrix-fp32": 4.0}


def same_gpu(a: GpuSpec, b: GpuSpec) -> bool:
    return replace(a, name="", aliases=(), device_names=(), source="", base=None, price=None) == \
        replace(b, name="", aliases=(), device_names=(), source="", base=None, price=None)


def predict(trace: Tables, origin: GpuSpec, target: GpuSpec) -> Prediction:
    """Compute kernels by the methods above, then NCCL kernels by the collective model (scale/collective.py;
    the target's deployment what-ifs matter only there)."""
    return collective.apply(trace, _predict(trace, origin, collective.without_deployment(target)), target)


def _predict(trace: Tables, origin: GpuSpec, target: GpuSpec) -> Prediction:
    g = trace.gpu
    t_o = g[S.DUR].to_numpy().astype(np.float64)
    n = len(g)
    if same_gpu(origin, target):
        return Prediction(origin, target, np.maximum(g[S.DUR].to_numpy(), 1), np.full(n, IDENTITY, dtype=object),
                          np.full(n, "", dtype=object))
    facts = kernel_facts(trace, origin, target)
    if origin.vendor != target.vendor:  # hook: NVIDIA <-> AMD kernels do not carry over (scale/vendor.py)
        return _cross_vendor(trace, origin, target, facts)
    method = np.full(n, WAVE, dtype=object)
    reason = np.full(n, "", dtype=object)
    kclass = g[S.KCLASS].to_numpy()
    library = np.isin(kclass, K.LIBRARY_CLASSES)
    method[library] = ROOFLINE_OP
    no_params = ~facts.has_params
    method[no_params] = FALLBACK
    reason[no_params] = NO_PARAMS_REASON
    if S.LAUNCH_ISSUE in g.columns:  # recorded but out of range, dropped at ingest: say which value
        issue = g[S.LAUNCH_ISSUE].to_numpy()
        bad = no_params & (issue != "")
        reason[bad] = issue[bad] + f" in the trace: launch parameters dropped, {NO_PARAMS_RULE}"
    is_copy = (g[S.CAT] != S.CAT_KERNEL).to_numpy()
    method[is_copy] = COPY
    reason[is_copy] = ""  # copies and sets have no grid: the bandwidth rule below is theirs, not a fallback
    substituted = (facts.pipe_target != facts.pipe) & ~is_copy
    reason[substituted] = [r + "; " * bool(r) + _precision_reason(p, q, target) for r, p, q in
                           zip(reason[substituted], facts.pipe[substituted], facts.pipe_target[substituted])]

    f_mem, f_comp = facts.f_mem, facts.f_comp
    t_t = wave.combine(t_o, facts.gamma, f_mem, f_comp, facts.flop_share)
    # copies: device-side ones move at the achievable DRAM bandwidth; host copies cross PCIe/NVLink-C2C,
    # which the catalog does not model per direction, so they keep their time.
    host_copy = is_copy & _name_matches(g[S.NAME], "HtoD|DtoH|HtoH|PtoP")
    t_t = np.where(is_copy, t_o * f_mem, t_t)
    t_t = np.where(host_copy, t_o, t_t)
    reason[host_copy] = "host copy: link bandwidth not modelled, origin time kept"
    # library-chosen FP32 GEMMs between two GPUs the learned model covers: its ratio instead of the wave law
    t_learned = _learned_gemm_ns(trace, origin, target, facts.pipe, t_o)
    use_learned = np.isfinite(t_learned) & ~is_copy
    t_t = np.where(use_learned, t_learned, t_t)
    method[use_learned] = LEARNED
    # FP32 GEMMs across architectures: the GPUs' sustained rates, not the per-SM datasheet peak ratio (crossarch)
    t_sus = _sustained_gemm_ns(trace, origin, target, facts.pipe, t_o)
    use_sus = np.isfinite(t_sus) & ~is_copy & ~use_learned
    t_t = np.where(use_sus, t_sus, t_t)
    method[use_sus] = SUSTAINED
    # roofline floor for library kernels whose op cost is known: never faster than physics
    floor = facts.roofline_floor_ns
    bounded = library & np.isfinite(floor)
    t_t = np.where(bounded, np.maximum(t_t, floor), t_t)
    dur = np.maximum(np.rint(t_t), 1).astype(np.int64)
    if origin.vendor == "amd":  # the occupancy rules ran without registers: say so where nothing else is said
        reason[(g[S.REGISTERS].to_numpy() < 0) & (reason == "")] = vendor.ROCM_REASON
    warnings = (*_warnings(no_params, is_copy), *_precision_warnings(facts, substituted, t_o, origin, target),
                *_shape_warnings(trace))
    return Prediction(origin, target, dur, method, reason, warnings=warnings, facts=facts)


def _precision_reason(pipe: str, used: str, target: GpuSpec) -> str:
    return (f"{pipe} kernel: {target.name} has no {pipe} tensor path; predicted at its {used} rate with "
            f"{ELEMENT_BYTES[used] / ELEMENT_BYTES[pipe]:g}x the bytes, the precision the model runs in there")


def _precision_warnings(facts: KernelFacts, substituted: np.ndarray, t_o: np.ndarray, origin: GpuSpec,
                        target: GpuSpec) -> tuple[str, ...]:
    """One line per (dtype on the origin, dtype on the target) pair that ``GpuSpec.tensor_pipe`` substituted."""
    out = []
    total = max(float(t_o.sum()), 1.0)
    pairs = pd.Series(facts.pipe[substituted] + ">" + facts.pipe_target[substituted])
    for pair, rows in pairs.groupby(pairs).groups.items():
        pipe, used = str(pair).split(">")
        share = float(t_o[np.flatnonzero(substituted)[np.asarray(rows)]].sum()) / total
        out.append(f"{len(rows)} {pipe} kernels ({share:.0%} of the origin's GPU time on {origin.name}) have no "
                   f"{pipe} tensor path on {target.name}: predicted at its {used} rate, as the model would run in "
                   f"{used} there (method unchanged, reason per kernel)")
    return tuple(out)


def _cross_vendor(trace: Tables, origin: GpuSpec, target: GpuSpec, facts: KernelFacts) -> Prediction:
    """NVIDIA trace -> AMD GPU or back: vendor.cross_vendor for kernels, copies as in predict."""
    g = trace.gpu
    t_o = g[S.DUR].to_numpy().astype(np.float64)
    t_t, method, reason = vendor.cross_vendor(g, facts, origin, target)
    is_copy = (g[S.CAT] != S.CAT_KERNEL).to_numpy()
    host_copy = is_copy & _name_matches(g[S.NAME], "HtoD|DtoH|HtoH|PtoP")
    t_t = np.where(is_copy, np.where(host_copy, t_o, t_o * facts.bw_origin / facts.bw_target), t_t)
    method[is_copy] = COPY
    reason[is_copy] = ""
    reason[host_copy] = "host copy: link bandwidth not modelled, origin time kept"
    dur = np.maximum(np.rint(t_t), 1).astype(np.int64)
    return Prediction(origin, target, dur, method, reason, facts=facts)


def _learned_gemm_ns(trace: Tables, origin: GpuSpec, target: GpuSpec, pipe: np.ndarray, t_o: np.ndarray) -> np.ndarray:
    """Target time of each FP32 (CUDA-core) GEMM kernel from the learned model, NaN where it does not apply
    (other kernels, GPUs outside envelope.covers, shapes not recorded, outside the model's domain). The
    model predicts a GEMM op's time: the ratio comes from the op's summed GEMM-kernel time and scales
    each of its kernels."""
    out = np.full(len(t_o), np.nan)
    if not (envelope.covers(origin) and envelope.covers(target)):
        return out
    rows, bmnk, op_dtype = gemm_kernel_shapes(trace, pipe == "fp32")
    rows, (b, m, n, k) = rows[op_dtype == "fp32"], bmnk[:, op_dtype == "fp32"]
    if not len(rows):
        return out
    op = trace.gpu[S.OP].to_numpy()[rows]
    t_op = pd.Series(t_o[rows]).groupby(op).transform("sum").to_numpy()
    out[rows] = t_o[rows] * learned.gemm_time_ratios(m, n, k, b, "fp32", origin, target, t_op)
    return out


def _sustained_gemm_ns(trace: Tables, origin: GpuSpec, target: GpuSpec, pipe: np.ndarray,
                       t_o: np.ndarray) -> np.ndarray:
    """Target time of each FP32 (CUDA-core) GEMM kernel with recorded shapes from scale/crossarch, NaN elsewhere
    (and everywhere when origin and target share an architecture). A kernel takes its time share of its op's cost."""
    out = np.full(len(t_o), np.nan)
    if not crossarch.applies(origin, target):
        return out
    rows, (b, m, n, k), op_dtype = gemm_kernel_shapes(trace, pipe == "fp32")
    rows, b, m, n, k = rows[op_dtype == "fp32"], *(x[op_dtype == "fp32"] for x in (b, m, n, k))
    share = _time_share_in_op(trace.gpu)[rows]
    flops, nbytes = gemm_flops_bytes(b, m, n, k, 4.0)  # FP32 operands
    out[rows] = crossarch.gemm_ns(share * flops, share * nbytes, b, m, n, t_o[rows], origin, target)
    return out


def gemm_kernel_shapes(trace: Tables, where: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GEMM kernels (rows of ``trace.gpu`` where ``where`` holds) whose launching op recorded GEMM shapes: their
    rows, (B, M, N, K) as a 4 x n float array, and the op's compute dtype from its input types (a CUDA-core
    kernel of a bf16 op is not an FP32 GEMM)."""
    g, ops = trace.gpu, trace.ops
    op = g[S.OP].to_numpy()
    cand = where & (g[S.KCLASS].to_numpy() == K.GEMM) & (op >= 0) & (g[S.CAT] == S.CAT_KERNEL).to_numpy()
    names, dims, types = ops[S.NAME].to_numpy(), ops[S.INPUT_DIMS].to_numpy(), ops[S.INPUT_TYPES].to_numpy()
    shape: dict[int, tuple[tuple[int, int, int, int], str]] = {}
    for o in np.unique(op[cand]).tolist():
        bmnk = gemm_dims(str(names[o]), dims[o])
        if bmnk is not None:
            shape[o] = bmnk, op_cost(str(names[o]), dims[o], types[o], None)[2]
    rows = np.flatnonzero(cand & np.isin(op, list(shape)))
    found = [shape[o] for o in op[rows].tolist()]
    return (rows, np.array([s for s, _ in found], dtype=np.float64).reshape(-1, 4).T,
            np.array([d for _, d in found], dtype=object))


def scale_factors(g: pd.DataFrame, waves_origin: np.ndarray, waves_target: np.ndarray, bw_origin: np.ndarray,
                  bw_target: np.ndarray, rate_ratio: np.ndarray, width: np.ndarray | float = 1.0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Memory-side and compute-side factors F_m, F_c per GPU event (docs/method.md steps 2-3)."""
    # a kernel run in a wider dtype on the target (GpuSpec.tensor_pipe) moves its operands at that width
    f_mem = bw_origin / bw_target * width
    # a library kernel whose grid fits one wave on the origin was sized to that GPU's SMs: the library
    # loops over tiles inside it (or picks a grid for the target's SMs there), so its waves are fractional
    sized_to_gpu = np.isin(g[S.KCLASS].to_numpy(), (K.GEMM, K.ATTENTION)) & (waves_origin <= 1.0)
    persistent = _name_matches(g[S.NAME], PERSISTENT_KERNELS) | sized_to_gpu
    f_comp = wave.wave_factor(waves_origin, waves_target, persistent) * rate_ratio
    return f_mem, f_comp


def _name_matches(names: pd.Series, pattern: str) -> np.ndarray:
    """``names.str.contains(pattern)`` as a bool array, the regex run once per distinct name (a few
    hundred kernel names repeat over a million events)."""
    codes, uniques = pd.factorize(names)
    hit = np.append(np.asarray(uniques.astype(str).str.contains(pattern, regex=True), dtype=bool), False)
    return hit[codes]  # code -1 (a missing name) picks the appended False


def _warnings(no_params: np.ndarray, is_copy: np.ndarray) -> tuple[str, ...]:
    k = int((no_params & ~is_copy).sum())
    return (f"{k} kernels have no valid launch parameters; scaled as a grid of many full waves (method "
            "'fallback': compute side by SMs x per-SM peak, memory side by bandwidth)",) if k else ()


def _shape_warnings(trace: Tables) -> tuple[str, ...]:
    ops = trace.ops
    dims = ops[S.INPUT_DIMS].to_numpy(dtype=object) if len(ops) else np.array([], dtype=object)
    if len(trace.gpu) and not any(d is not None and len(d) for d in dims):
        return ("no input shapes recorded (profile with record_shapes=True): op FLOPs and bytes are unknown, so γ "
                "takes class defaults and library kernels get no roofline bound",)
    return ()


def kernel_facts(trace: Tables, origin: GpuSpec, target: GpuSpec) -> KernelFacts:
    g = trace.gpu
    blocks = (g[S.GRID_X] * g[S.GRID_Y] * g[S.GRID_Z]).to_numpy().astype(np.float64)
    threads = (g[S.BLOCK_X] * g[S.BLOCK_Y] * g[S.BLOCK_Z]).to_numpy()
    has_params = (blocks > 0) & (threads > 0)
    thr = np.where(has_params, threads, 1)
    # ROCm traces record no registers (-1): no register limit, as the CUDA rules read 0
    regs, smem = np.maximum(g[S.REGISTERS].to_numpy(), 0), g[S.SHARED_MEM].to_numpy()
    bps_o = np.maximum(_blocks_per_sm(thr, regs, smem, origin), 1)
    bps_t = np.maximum(_blocks_per_sm(thr, regs, _fit_smem(smem, target), target), 1)
    # without launch parameters assume a kernel that fills many waves (NO_PARAMS_REASON)
    blocks = np.where(has_params, blocks, MANY_WAVES_GRID)
    w_o = occupancy.waves(blocks, bps_o, origin.sms)
    w_t = occupancy.waves(blocks, bps_t, target.sms)
    eff_o, eff_t = crossarch.dram_efficiencies(origin, target)
    bw_o = wave.achievable_bandwidth_gbs(origin.sms, origin.boost_clock_mhz, origin.memory_bandwidth_gbs,
                                         np.minimum(w_o, 1.0), eff_o)
    bw_t = wave.achievable_bandwidth_gbs(target.sms, target.boost_clock_mhz, target.memory_bandwidth_gbs,
                                         np.minimum(w_t, 1.0), eff_t)
    flops, nbytes, pipe = _costs(trace)
    peak_o = np.array([origin.pipe_peak_tflops(p) for p in pipe])
    peak_t = np.array([target.pipe_peak_tflops(p) for p in pipe])
    pipe_t = np.array([p if p == "fp32" else target.tensor_pipe(p) for p in pipe], dtype=object)
    width = np.array([ELEMENT_BYTES.get(q, 4.0) / ELEMENT_BYTES.get(p, 4.0) for p, q in zip(pipe, pipe_t)])
    rate_ratio = (peak_o / origin.sms) / (peak_t / target.sms)
    gamma = _gamma(g, nbytes, bw_o)
    # lower bound on the target for the op's share of work: FLOPs at peak, bytes at DRAM bandwidth
    share = _time_share_in_op(g)
    floor_t = share * wave.roofline_ns(flops, nbytes * width, peak_t, target.memory_bandwidth_gbs)
    floor_o = share * wave.roofline_ns(flops, nbytes, peak_o, origin.memory_bandwidth_gbs)
    # where the origin ran faster than its own roofline estimate, the estimate is off (wrong shapes or
    # dtype): no bound then
    t_o = g[S.DUR].to_numpy().astype(np.float64)
    floor = np.where(t_o >= floor_o, floor_t, np.nan)
    # share of the origin time the op's FLOPs needed at the pipe's peak, for GEMM kernels only: a GEMM op
    # is its GEMM kernel(s), while conv and attention ops split their FLOPs over helper kernels (cuDNN
    # wgrad reductions, layout transforms, softmax statistics) whose time share says nothing of FLOPs
    gemm = (g[S.KCLASS] == K.GEMM).to_numpy()
    # (unknown FLOPs stay NaN: wave.combine reads NaN as 0 and clips to [0, 1])
    flop_share = np.where(gemm, share * flops / (peak_o * 1e3) / np.maximum(t_o, 1.0), 0.0)
    # more FLOPs than the pipe could issue in the measured time: the op's shapes do not describe this kernel
    # (a wrong op link or dtype), so neither its FLOPs nor its bytes say anything; class defaults instead.
    # Otherwise the round trip is lopsided: u clipped to 1 hides the DRAM term one way (F_m < 1), the
    # bytes' γ wins the max the other way (F_m > 1). Never the case on the shared or collected traces.
    off = flop_share > 1.0
    flop_share = np.where(off, 0.0, flop_share)
    gamma = np.where(off, LIBRARY_GAMMA_WITHOUT_SHAPES, gamma)
    f_mem, f_comp = scale_factors(g, w_o, w_t, bw_o, bw_t, rate_ratio, width)
    return KernelFacts(has_params=has_params, pipe=np.array(pipe, dtype=object), waves_origin=w_o, waves_target=w_t,
                       bw_origin=bw_o, bw_target=bw_t, rate_ratio=rate_ratio, gamma=gamma, flop_share=flop_share,
                       roofline_floor_ns=floor, f_mem=f_mem, f_comp=f_comp, pipe_target=pipe_t, width=width,
                       flops=share * flops, nbytes=share * nbytes)


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


def _costs(trace: Tables) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per GPU event: its op's FLOPs and bytes (NaN unknown) and the pipe (tensor dtype or fp32)."""
    g, ops = trace.gpu, trace.ops
    op = g[S.OP].to_numpy()
    cache: dict[int, tuple[float, float, str]] = {}
    # columns as arrays once: a DataFrame lookup per op cost 30 µs each on a 1M-event trace
    names, dims, types = ops[S.NAME].to_numpy(), ops[S.INPUT_DIMS].to_numpy(), ops[S.INPUT_TYPES].to_numpy()
    concrete = ops[S.CONCRETE_INPUTS].to_numpy() if S.CONCRETE_INPUTS in ops else None
    for o in np.unique(op[op >= 0]).tolist():
        cache[o] = op_cost(str(names[o]), dims[o], types[o], concrete[o] if concrete is not None else None)
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
    return flops, nbytes, pipes


def _gamma(g: pd.DataFrame, nbytes: np.ndarray, bw_origin: np.ndarray) -> np.ndarray:
    """Share of a kernel's origin time the DRAM was busy: its share of the op's bytes over what the
    achievable bandwidth moves in that time (the 'achieved throughput against the roofline').
    A streaming kernel that reaches only half the bandwidth is half latency/issue-bound, and that
    half scales with the SM side, not with bandwidth. Class defaults where the shapes are unknown."""
    share = _time_share_in_op(g, library_only=False)
    t = np.maximum(g[S.DUR].to_numpy(), 1).astype(np.float64)
    used = share * nbytes / (t * bw_origin)  # bytes / (ns * GB/s) = bytes / (ns * B/ns)
    kclass = g[S.KCLASS].to_numpy()
    library = np.isin(kclass, K.LIBRARY_CLASSES)
    default = np.where(library, LIBRARY_GAMMA_WITHOUT_SHAPES, STREAMING_GAMMA_WITHOUT_SHAPES)
    # a helper kernel of a library op (layout transform, bias, cast) moves tensors the op's byte
    # count does not see (the library kernel re-reads them): it takes the streaming default
    op_cls = pd.Series(library).groupby(g[S.OP].to_numpy()).transform("any").to_numpy()
    helper = op_cls & ~library & (g[S.OP].to_numpy() >= 0)
    used = np.where(helper, np.nan, used)
    # more bytes than the DRAM could move in the measured time: the surplus hit in L2, so at most
    # 1/used of the traffic (and of the time) can have been DRAM-bound
    dram_share = np.where(used > 1.0, 1.0 / np.maximum(used, 1e-9), used)
    return np.where(np.isfinite(used), np.clip(dram_share, 0.0, 1.0), default)


def _time_share_in_op(g: pd.DataFrame, library_only: bool = True) -> np.ndarray:
    """Fraction of its op's (library-)kernel time each kernel took on the origin (splits the op's cost)."""
    lib = np.isin(g[S.KCLASS].to_numpy(), K.LIBRARY_CLASSES) | (not library_only)
    dur = np.where(lib, g[S.DUR].to_numpy(), 0).astype(np.float64)
    key = g[S.OP].to_numpy()
    total = pd.Series(dur).groupby(key).transform("sum").to_numpy()
    return np.where(total > 0, dur / np.maximum(total, 1), 0.0)

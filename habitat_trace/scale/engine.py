"""``predict(trace, origin, target) -> Prediction``: a duration and a method for every GPU event.

Pure function of the ingest tables and two GpuSpecs; reads no JSON, writes nothing.
Methods: identity (same GPU), copy (memcpy/memset), wave (kernels with launch parameters),
roofline-op (library GEMM/conv/attention/RNN kernels: wave law, then bounded below by the target's
roofline for the op's FLOPs and bytes), learned (FP32 GEMMs between two real GPUs inside the learned
model's trained range, scale/learned/envelope.py: its time ratio, roofline-bounded), sustained (every kernel
between two different chips: compute, DRAM and latency work at what each GPU sustains, scale/crossarch.py), fallback
(no launch parameters: class-level rule). Between an NVIDIA and an AMD GPU one hook hands the kernels to scale/vendor.py
(roofline-op for library kernels, bandwidth for the rest).
"""
from __future__ import annotations

import copy
from dataclasses import is_dataclass, replace

import numpy as np
import pandas as pd

from habitat_trace.ingest import classify as K
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import KernelTables as Tables
from habitat_trace.ingest.trace import derived
from habitat_trace.scale import collective, crossarch, learned, vendor, wave
from habitat_trace.scale.cost import foreach_byte_scale
from habitat_trace.scale.facts import (ELEMENT_BYTES, attention_tiles, costs, gemm_kernel_shapes, in_place_bytes,
                                       kernel_facts, name_matches, per_name, trace_shapes, twins)
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.learned import envelope
from habitat_trace.scale.rates import power_fraction, rates, tensor_fraction
from habitat_trace.scale.prediction import (COPY, FALLBACK, IDENTITY, LEARNED, ROOFLINE_OP, SUSTAINED, WAVE,
                                            KernelFacts, Prediction)

# What the engine does for a kernel without valid grid/block: kernel_facts assumes MANY_WAVES_GRID blocks, so the
# compute side scales by the SM count and per-SM peak, and the memory side by the achievable bandwidth.
NO_PARAMS_RULE = "wave law with a grid of many full waves assumed"
NO_PARAMS_REASON = f"no launch parameters (grid/block) in the trace: {NO_PARAMS_RULE}"
NO_SHAPES_REASON = "op bytes unknown (no recorded shapes, or a helper kernel of a library op): class default shares"
TWIN_REASON = ("no op in the trace (launched before the profiling window opened): the op facts of the same kernel "
               "(name, grid, block) launched in the window")
# ATen's own CUDA kernels (namespace at::native) run the same code on every GPU, on the CUDA cores, even where their op
# is a library class (depthwise convolutions: aten::_conv_depthwise2d)
ATEN_NATIVE = r"at::native::"


def same_gpu(a: GpuSpec, b: GpuSpec) -> bool:
    return replace(a, name="", aliases=(), device_names=(), source="", base=None, price=None) == \
        replace(b, name="", aliases=(), device_names=(), source="", base=None, price=None)


def predict(trace: Tables, origin: GpuSpec, target: GpuSpec) -> Prediction:
    """Compute kernels by the methods above, then NCCL kernels by the collective model (scale/collective.py;
    the target's deployment what-ifs matter only there)."""
    return collective.apply(trace, _predict(trace, origin, collective.without_deployment(target)), target)


def _predict(trace: Tables, origin: GpuSpec, target: GpuSpec) -> Prediction:
    return _via_base(trace, origin, target, _direct(trace, origin, target))


def _via_base(trace: Tables, origin: GpuSpec, target: GpuSpec, direct: Prediction) -> Prediction:
    """A what-if GPU (``base = NAME``) runs its base's kernels, so the FP32 GEMMs the learned model predicts on the
    base (a catalog GPU inside its envelope; what-if entries are outside it, envelope.py) go to the base first and
    from there to the what-if by the same-chip law, as every kernel from the base's own chip does. Predicted
    directly they switched method: a P4 at 100% of its power limit ran a V100's SGEMM in 34 ms by the law, the P4
    itself in 101 ms by the learned model, so lowering its limit made it 3x faster (issue 32's property)."""
    base = root = target.base_spec
    while root is not None and root.base_spec is not None:
        root = root.base_spec
    if base is None or root is None or not (envelope.covers(origin) and envelope.covers(root)):
        return direct
    via = _predict(trace, origin, base)
    learned_rows = via.method == LEARNED
    if not learned_rows.any():
        return direct
    moved = _direct(_retimed(trace, via.dur_ns), base, target)
    note = f"learned model to {base.name} (its base), then the same-chip law"
    return replace(direct, dur_ns=np.where(learned_rows, moved.dur_ns, direct.dur_ns),
                   method=np.where(learned_rows, LEARNED, direct.method),
                   reason=np.where(learned_rows, note, direct.reason))


def _retimed(trace: Tables, dur_ns: np.ndarray) -> Tables:
    """``trace`` with other GPU event durations (the engine reads no other time); derived tables are rebuilt."""
    gpu = trace.gpu.assign(**{S.DUR: dur_ns})
    if is_dataclass(trace):
        return replace(trace, gpu=gpu)
    out = copy.copy(trace)  # the small test tables (types.SimpleNamespace)
    out.gpu = gpu  # type: ignore[misc]
    return out


def _direct(trace: Tables, origin: GpuSpec, target: GpuSpec) -> Prediction:
    g = trace.gpu
    t_o = g[S.DUR].to_numpy().astype(np.float64)
    n = len(g)
    if same_gpu(origin, target):
        return Prediction(origin, target, np.maximum(g[S.DUR].to_numpy(), 1), np.full(n, IDENTITY, dtype=object),
                          np.full(n, "", dtype=object))
    facts = kernel_facts(trace, origin, target)
    if origin.vendor != target.vendor:  # hook: NVIDIA <-> AMD kernels do not carry over (scale/vendor.py)
        return _cross_vendor(trace, origin, target, facts)
    if crossarch.applies(origin, target):  # hook: another chip runs other kernels at other efficiencies
        return _cross_chip(trace, origin, target, facts)
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
    t_t = wave.combine(t_o, facts.gamma, facts.f_mem, facts.f_comp, facts.flop_share)
    t_t, substituted = _finish(trace, origin, target, facts, t_t, facts.f_mem, method, reason)
    dur = np.maximum(np.rint(t_t), 1).astype(np.int64)
    if origin.vendor == "amd":  # the occupancy rules ran without registers: say so where nothing else is said
        reason[(g[S.REGISTERS].to_numpy() < 0) & (reason == "")] = vendor.ROCM_REASON
    is_copy = derived(trace, _copies)[0]
    warnings = (*_warnings(no_params, is_copy), *_precision_warnings(facts, substituted, t_o, origin, target),
                *_shape_warnings(trace))
    return Prediction(origin, target, dur, method, reason, warnings=warnings, facts=facts)


def _finish(trace: Tables, origin: GpuSpec, target: GpuSpec, facts: KernelFacts, t_t: np.ndarray,
            mem_ratio: np.ndarray | float, method: np.ndarray, reason: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What every same-vendor law shares, applied to its kernel times ``t_t`` (``method``/``reason`` in place):
    copies and sets at the DRAM ratio ``mem_ratio`` (host copies cross PCIe/NVLink-C2C, which the catalog does not
    model per direction: they keep their time); FP32 GEMMs between two GPUs the learned model covers take its ratio;
    library kernels whose op cost is known are never faster than the target's roofline; a kernel run at a precision
    the target substitutes says so. Returns the times and the substituted kernels."""
    g = trace.gpu
    t_o = g[S.DUR].to_numpy().astype(np.float64)
    is_copy, host_copy = derived(trace, _copies)
    method[is_copy], reason[is_copy] = COPY, ""  # no grid: the bandwidth rule is theirs, not a fallback
    twin = (twins(trace) != np.arange(len(g))) & ~is_copy
    reason[twin] = [r + "; " * bool(r) + TWIN_REASON for r in reason[twin]]
    substituted = (facts.pipe_target != facts.pipe) & ~is_copy
    reason[substituted] = [r + "; " * bool(r) + _precision_reason(p, q, target) for r, p, q in
                           zip(reason[substituted], facts.pipe[substituted], facts.pipe_target[substituted])]
    t_t = np.where(is_copy, np.where(host_copy, t_o, t_o * mem_ratio), t_t)
    reason[host_copy] = "host copy: link bandwidth not modelled, origin time kept"
    t_learned = _learned_gemm_ns(trace, origin, target, facts.pipe, t_o)
    use_learned = np.isfinite(t_learned) & ~is_copy
    t_t = np.where(use_learned, t_learned, t_t)
    method[use_learned] = LEARNED
    bounded = np.isin(g[S.KCLASS].to_numpy(), K.LIBRARY_CLASSES) & np.isfinite(facts.roofline_floor_ns)
    return np.where(bounded, np.maximum(t_t, facts.roofline_floor_ns), t_t), substituted


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
    is_copy, host_copy = derived(trace, _copies)
    t_t = np.where(is_copy, np.where(host_copy, t_o, t_o * facts.bw_origin / facts.bw_target), t_t)
    method[is_copy] = COPY
    reason[is_copy] = ""
    reason[host_copy] = "host copy: link bandwidth not modelled, origin time kept"
    dur = np.maximum(np.rint(t_t), 1).astype(np.int64)
    return Prediction(origin, target, dur, method, reason, facts=facts)


def _cross_chip(trace: Tables, origin: GpuSpec, target: GpuSpec, facts: KernelFacts) -> Prediction:
    """Two different chips: every kernel by scale/crossarch.py (method 'sustained'); copies as in predict; FP32 GEMMs
    the learned model covers keep it; library kernels keep the roofline floor."""
    g = trace.gpu
    t_o = g[S.DUR].to_numpy().astype(np.float64)
    work = cross_chip_work(trace, facts)
    r_o, r_t = rates(origin), rates(target)
    t_t, parts = crossarch.predict_ns(work, r_o, r_t)
    n = len(g)
    method, reason = np.full(n, SUSTAINED, dtype=object), np.full(n, "", dtype=object)
    reason[~np.isfinite(work.nbytes)] = NO_SHAPES_REASON
    if S.LAUNCH_ISSUE in g.columns:  # recorded but out of range, dropped at ingest: say which value
        issue = g[S.LAUNCH_ISSUE].to_numpy()
        bad = issue != ""
        reason[bad] = issue[bad] + " in the trace: launch parameters dropped (this law does not read them)"
    mem_ratio = r_o.dram_gbs / r_t.dram_gbs
    t_t, substituted = _finish(trace, origin, target, facts, t_t, mem_ratio, method, reason)
    dur = np.maximum(np.rint(t_t), 1).astype(np.int64)
    shown = replace(facts, gamma=np.clip(parts.dram / np.maximum(t_o, 1.0), 0, 1),
                    flop_share=np.clip(parts.compute / np.maximum(t_o, 1.0), 0, 1), f_mem=np.full(n, mem_ratio),
                    f_comp=np.full(n, r_o.sm_ghz / r_t.sm_ghz))
    warnings = (*_precision_warnings(facts, substituted, t_o, origin, target), *_shape_warnings(trace),
                *_rate_warnings(origin, target, work))
    return Prediction(origin, target, dur, method, reason, warnings=warnings, facts=shown)


def cross_chip_work(trace: Tables, facts: KernelFacts) -> crossarch.Work:
    """What crossarch.predict_ns needs of each GPU event. Library kernels (cuBLAS, cuDNN, flash attention) carry their
    op's FLOPs and bytes on their pipe; ATen's own CUDA kernels of library ops (depthwise convolutions) run the same
    code on every GPU, on the CUDA cores; every other kernel streams its op's bytes (its time share of them). Where
    the op recorded no shapes the class default shares stand in (crossarch.Work). All but the target's pipe and
    operand width is the trace's alone: built once per trace (Tables.derived), for every target."""
    work, native = derived(trace, _cross_chip_origin_work)
    return replace(work, pipe_target=np.where(native, "fp32", facts.pipe_target).astype(object),
                   width=np.where(native, 1.0, facts.width))


def _cross_chip_origin_work(trace: Tables) -> tuple[crossarch.Work, np.ndarray]:
    """cross_chip_work without the target's pipe and width (left as the origin's), and the ATen-native mask."""
    g, sh = trace.gpu, trace_shapes(trace)
    library, helper = sh.library, sh.helper
    native = library & name_matches(g[S.NAME], ATEN_NATIVE)
    op = g[S.OP].to_numpy()
    flops, nbytes_op, pipes = costs(trace)
    op_bytes = nbytes_op + in_place_bytes(trace)  # an in-place op writes its self tensor back
    # a library kernel's FLOPs and bytes: its share of its op's, as kernel_facts takes them
    nbytes = np.where(library, sh.share * nbytes_op, sh.share_all * op_bytes)
    # a helper kernel of a library op is mostly a layout transform (cuDNN's nchwToNhwc/nhwcToNchw around an NHWC
    # kernel): it reads and writes the op's activations once, 2 x the op's bytes over its helpers by time share
    dur = np.where(helper, sh.t_origin, 0.0)
    helper_total = pd.Series(dur).groupby(op).transform("sum").to_numpy()
    nbytes = np.where(helper, 2.0 * op_bytes * dur / np.maximum(helper_total, 1.0), nbytes)
    # a foreach kernel's TensorLists were counted at 4 bytes an element; its name says its own (cost.foreach_byte_scale)
    nbytes = nbytes * per_name(g[S.NAME], foreach_byte_scale, 1.0).astype(float)
    pipe = np.where(native, "fp32", np.array(pipes, dtype=object)).astype(object)
    rows, bmnk, _ = gemm_kernel_shapes(trace, np.ones(len(g), dtype=bool))
    tiles = np.full(len(g), np.nan)
    tiles[rows] = crossarch.gemm_tiles(bmnk[0], bmnk[1], bmnk[2], pipe[rows] != "fp32") * crossarch.split_k(
        bmnk[0], g[S.GRID_Z].to_numpy()[rows])
    batched = np.zeros(len(g), dtype=bool)
    batched[rows] = bmnk[0] > 1
    src = twins(trace)  # a kernel without its op takes its twin's FLOPs, bytes and pipe
    # a fused attention kernel on the tensor cores is tiled like a GEMM (cost.attention_tiles): its time beyond its
    # rate adds to the math the same way (crossarch module doc)
    attn = np.where(library & ~helper & ~native & (pipe != "fp32"), attention_tiles(trace), np.nan)[src]
    tiles = np.where(np.isnan(tiles), attn, tiles)
    flops_k = np.where(library, sh.share * flops, 0.0)[src]
    work = crossarch.Work(t_origin=sh.t_origin, flops=flops_k, nbytes=nbytes[src], pipe=pipe[src],
                          pipe_target=pipe[src], width=np.ones(len(g)), tiles=tiles,
                          memory_default=sh.gamma_default[src],
                          compute_default=np.where(library, crossarch.COMPUTE_SHARE_WITHOUT_SHAPES, 0.0)[src],
                          batched=batched)
    native = native[src]
    for a in (work.t_origin, work.flops, work.nbytes, work.pipe, work.tiles, work.memory_default,
              work.compute_default, batched, native):
        a.setflags(write=False)  # shared by every target's prediction
    return work, native


def _rate_warnings(origin: GpuSpec, target: GpuSpec, work: crossarch.Work) -> tuple[str, ...]:
    """One line per GPU whose sustained figure for a pipe this trace uses (or its copy bandwidth) is not catalogued
    (the clock falls back to the boost clock silently: that is the documented default)."""
    pipes = set(work.pipe) | set(work.pipe_target)  # a few distinct pipes over every kernel: formatted once each
    used = {f"tensor_sustained_tflops_{p}" for p in pipes} | {"memory_bandwidth_achievable_gbs"}
    if "fp32" in pipes:
        used.add("fp32_gemm_sustained_tflops")
    names = {"fp32_gemm_sustained_tflops": "fp32 (CUDA cores)", "memory_bandwidth_achievable_gbs": "copy bandwidth"}
    out = []
    for role, spec in (("origin", origin), ("target", target)):
        missing = [m for m in rates(spec).fallbacks if m in used]
        # a tensor dtype of a GPU with another measured tensor dtype runs at that fraction (the power limit)
        own = [m for m in missing if m.startswith("tensor_") and tensor_fraction(spec) is not None]
        # none measured, but its SGEMM or a catalogued clock shows its power limit: the median, held down by it
        held = [m for m in missing if m.startswith("tensor_") and m not in own and power_fraction(spec) is not None]
        median = [m for m in missing if m not in own and m not in held]
        for group, how in ((median, "the median sustained/datasheet ratio of the catalogued GPUs stands in"),
                           (own, "its measured fraction of another tensor dtype stands in (its power limit)"),
                           (held, "the median sustained/datasheet ratio stands in, at the share of its boost clock "
                                  "its SGEMM or catalogued clock shows (its power limit)")):
            if group:
                shown = ", ".join(names.get(m, m.replace("tensor_sustained_tflops_", "")) for m in group)
                out.append(f"{role} {spec.name} has no measured sustained {shown} in the catalog; {how} "
                           "(scale/rates.py)")
    return tuple(out)


def _learned_gemm_ns(trace: Tables, origin: GpuSpec, target: GpuSpec, pipe: np.ndarray, t_o: np.ndarray) -> np.ndarray:
    """Target time of each FP32 (CUDA-core) GEMM kernel from the learned model, NaN where it does not apply
    (other kernels, GPUs outside envelope.covers, two boards of one chip, shapes not recorded, outside the model's
    domain). The model predicts a GEMM op's time: the ratio comes from the op's summed GEMM-kernel time and scales
    each of its kernels. It was trained on pairs of five different chips only: on two boards of one chip (an A100
    PCIe 40GB and 80GB, a V100 PCIe and SXM2), where the library runs the same kernels, it had no data and put the
    80 GB A100 at 1.10x the 40 GB one's time over NeuSight's A100 shapes (5-95%: 0.78-1.38x) for a board with more
    bandwidth and power; those keep the wave law (the same rule as a what-if GPU's, crossarch.applies)."""
    out = np.full(len(t_o), np.nan)
    if not (envelope.covers(origin) and envelope.covers(target) and crossarch.applies(origin, target)):
        return out
    rows, bmnk, op_dtype = gemm_kernel_shapes(trace, pipe == "fp32")
    rows, (b, m, n, k) = rows[op_dtype == "fp32"], bmnk[:, op_dtype == "fp32"]
    if not len(rows):
        return out
    op = trace.gpu[S.OP].to_numpy()[rows]
    t_op = pd.Series(t_o[rows]).groupby(op).transform("sum").to_numpy()
    out[rows] = t_o[rows] * learned.gemm_time_ratios(m, n, k, b, "fp32", origin, target, t_op)
    return out


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


def _copies(trace: Tables) -> tuple[np.ndarray, np.ndarray]:
    """(copies and sets, the host copies among them): the same for every target, built once per trace
    (Tables.derived; scale --to all asked for them 52 times)."""
    g = trace.gpu
    is_copy = (g[S.CAT] != S.CAT_KERNEL).to_numpy()
    is_copy.setflags(write=False)
    host_copy = is_copy & name_matches(g[S.NAME], "HtoD|DtoH|HtoH|PtoP")
    host_copy.setflags(write=False)
    return is_copy, host_copy

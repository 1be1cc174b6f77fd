"""Rules for kernels whose code does not carry over unchanged between the origin and the target GPU's vendors.

Contract: ``cross_vendor(g, facts, origin, target) -> (t_target_ns, method, reason)`` per GPU event of ``g``, for
an NVIDIA trace scaled to an AMD GPU or back; ``rocm_reason`` is the note every AMD -> AMD kernel carries. Pure.
The engine calls this from one hook (engine.predict) and hands it the facts it computes for the wave law
(facts.kernel_facts: the op's FLOPs and bytes, the pipe, γ): one roofline (wave.roofline_ns) and one γ-combination
(wave.combine) for both paths.

Why not the wave law across vendors: the libraries pick other kernels (hipBLASLt/Tensile vs cuBLAS, CK/aiter vs
FlashAttention), with other grids, tiles and wavefront widths (64 vs 32), so the origin's grid says nothing of the
target's waves. Instead:
- library ops (GEMM, conv, attention, RNN) with known FLOPs and bytes: the op reaches the same fraction of the
  target's roofline as it reached of the origin's, T_t = T_o · R_t / R_o, R_g = roofline_ns(FLOPs, bytes, pipe
  peak_g, BW_g) (Williams et al., CACM 2009); FP32 GEMMs run on AMD's matrix cores (rocBLAS/hipBLASLt FP32 MFMA
  kernels, pipe "matrix-fp32") and on NVIDIA's CUDA cores. Without shapes: the ratio of the pipe peaks;
- everything else (elementwise, reductions, norms, copies inside kernels): the same source built for the other
  vendor, so the time splits as the engine's γ says: γ on DRAM at the achievable-bandwidth ratio, the rest at the
  ratio of vector FP32 peaks (the whole GPU's, since the grid changes with the wavefront width).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from habitat_trace.ingest import classify as K
from habitat_trace.ingest import schema as S
from habitat_trace.scale import wave
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.prediction import BANDWIDTH, ROOFLINE_OP, KernelFacts

LIBRARY_REASON = ("cross-vendor: the target's library picks its own kernels; op FLOPs/bytes on the target's roofline "
                  "at the fraction of the roofline the origin reached")
NO_SHAPES_REASON = "cross-vendor: op shapes not recorded; pipe peak ratio"
STREAMING_REASON = ("cross-vendor: same source, other compiler and launch shape (no wave law); γ x achievable "
                    "DRAM bandwidth ratio + (1 - γ) x vector FP32 peak ratio")
ROCM_REASON = ("registers per thread not recorded (ROCm): CDNA occupancy from wavefront, workgroup and LDS limits "
               "only, no VGPR limit assumed")


def library_peak_tflops(spec: GpuSpec, pipe: str) -> float:
    """Peak of the pipe a library GEMM of this dtype runs on: FP32 (and TF32 where the GPU has none) goes to AMD's
    matrix cores and NVIDIA's CUDA cores; other dtypes to the tensor/matrix peak (FP32 vector when absent)."""
    if pipe in ("fp32", "matrix-fp32") or (pipe == "tf32" and "tf32" not in spec.tensor_tflops):
        return spec.pipe_peak_tflops("matrix-fp32" if spec.vendor == "amd" else "fp32")
    return spec.pipe_peak_tflops(pipe)


def cross_vendor(g: pd.DataFrame, facts: KernelFacts, origin: GpuSpec,
                 target: GpuSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t_o = g[S.DUR].to_numpy().astype(np.float64)
    n = len(t_o)
    library = np.isin(g[S.KCLASS].to_numpy(), K.LIBRARY_CLASSES)
    pipe = facts.pipe
    kinds = set(pipe)  # per distinct pipe (a few), not per kernel
    of_o, of_t = ({p: library_peak_tflops(spec, p) for p in kinds} for spec in (origin, target))
    peak_o = np.array([of_o[p] for p in pipe]) if n else np.zeros(0)
    peak_t = np.array([of_t[p] for p in pipe]) if n else np.zeros(0)
    flops, nbytes = facts.flops, facts.nbytes
    r_o = wave.roofline_ns(flops, nbytes, peak_o, origin.memory_bandwidth_gbs)
    r_t = wave.roofline_ns(flops, nbytes, peak_t, target.memory_bandwidth_gbs)
    known = np.isfinite(r_o) & np.isfinite(r_t) & (r_o > 0)
    ratio_lib = np.where(known, r_t / np.where(known, r_o, 1.0), peak_o / peak_t)
    # streaming kernels: every SM busy on both sides (grids are sized for the target's CUs by the same launcher)
    full = np.ones(n)
    f_mem = (wave.achievable_bandwidth_gbs(origin.sms, origin.boost_clock_mhz, origin.memory_bandwidth_gbs, full)
             / wave.achievable_bandwidth_gbs(target.sms, target.boost_clock_mhz, target.memory_bandwidth_gbs, full))
    f_comp = np.full(n, origin.fp32_tflops / target.fp32_tflops)
    t_stream = wave.combine(t_o, facts.gamma, f_mem, f_comp)
    t_t = np.where(library, t_o * ratio_lib, t_stream)
    method = np.where(library, ROOFLINE_OP, BANDWIDTH).astype(object)
    reason = np.where(library, np.where(known, LIBRARY_REASON, NO_SHAPES_REASON), STREAMING_REASON).astype(object)
    return t_t, method, reason

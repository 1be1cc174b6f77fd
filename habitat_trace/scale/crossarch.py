"""Across GPU architectures: FP32 library GEMMs from what each GPU *sustains*, not its datasheet peak (issue 17).

Contract: ``gemm_ns(flops, nbytes, b, m, n, t_origin_ns, origin, target)`` returns each FP32 (CUDA-core) GEMM
kernel's time on the target, or NaN where the law does not apply (``applies`` False: same architecture, or a GPU
without a sustained rate in the catalog). Pure numpy; the engine calls it through one hook.

Why: the wave law's compute factor is the ratio of per-SM datasheet peaks, which assumes every GPU's SGEMM reaches
the same fraction of its peak. They do not: Hopper's SGEMM reaches ~0.77 of its doubled FP32 issue rate, Volta's
~0.89, and the 70-75 W T4 and P4 (and L4) cannot hold their boost clock under sustained math (~0.4-0.55). The
catalog key ``fp32_gemm_sustained_tflops`` holds what large GEMMs reach on each GPU (sourced per GPU;
benchmarks/crossarch/fit_sustained.py for the NeuSight-measured ones and the H100).

Law (per GEMM, dims B x M x N x K; the roofline of Williams et al., CACM 2009, with the *achievable* peaks;
tile/wave quantization as in Habitat §4.1 and NeuSight's tile-and-wave model, arXiv 2407.13853 §4):
    q_g       = W_g / ceil(W_g),  W_g = B · ceil(M/T) · ceil(N/T) / S_g         (last-wave efficiency, T = 64)
    D_g       = max(FLOPs / (R_g · q_g), bytes / (e_g · BW_g))                  (R_g: sustained FP32 GEMM rate,
                                                                                 e_g: the GPU's DRAM efficiency)
    direct    T_t = D_t                    (the target's own roofline at its sustained rate; the default)
    ratio     T_t = T_o · D_t / D_o        (the origin's measured time carries the shape's efficiency)
``MODE`` picks one; benchmarks/neusight_e2e.py measures both (docs/method.md "Across architectures": direct 10.5%,
ratio 14.2% mean drift-free error on the NeuSight dev GPUs).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from habitat_trace.scale import wave
from habitat_trace.scale.gpu import GpuSpec

SUSTAINED_KEY = "fp32_gemm_sustained_tflops"
DRAM_KEY = "dram_efficiency"
# Output tile for the wave count: cuBLAS SGEMM kernels tile C in 32..128-wide tiles (NeuSight kernel names:
# volta/ampere/maxwell_sgemm_128x64, 128x128, 32x128). 64 fits NeuSight's per-kernel data best (mean |log error| of
# D_g over the GEMMs >= 1 GFLOP of its five GPUs: 0.435 at 64, 0.437 at 32, 0.458 at 128, 0.545 at 256), chosen
# there and not on any end-to-end label.
TILE = 64.0
RATIO, DIRECT = "ratio", "direct"
# direct: 10.5% mean drift-free error on the NeuSight dev GPUs, ratio 14.2% (benchmarks/results/neusight_e2e.md)
MODE = DIRECT


def sustained_tflops(spec: GpuSpec) -> float:
    """The GPU's sustained FP32 GEMM rate from the catalog, NaN when the catalog has none."""
    v = spec.extra.get(SUSTAINED_KEY)
    return float(v) if isinstance(v, (int, float)) and v > 0 else float("nan")


def dram_efficiency(spec: GpuSpec) -> float:
    """Achievable fraction of the datasheet DRAM bandwidth for streaming kernels: the catalog's ``dram_efficiency``
    (GDDR cards and the P100 reach 0.70-0.74, HBM2 V100 0.85, H100/H200 0.88-0.90), else wave.py's measured
    Hopper constant."""
    v = spec.extra.get(DRAM_KEY)
    return float(v) if isinstance(v, (int, float)) and 0 < v <= 1 else wave.ACHIEVABLE_BANDWIDTH_FRACTION


def dram_efficiencies(origin: GpuSpec, target: GpuSpec) -> tuple[float, float]:
    """(origin, target) DRAM efficiency for the engine's memory side: per GPU across architectures, wave.py's one
    constant within an architecture (the validated same-architecture path stays as it was)."""
    if origin.architecture == target.architecture:
        return wave.ACHIEVABLE_BANDWIDTH_FRACTION, wave.ACHIEVABLE_BANDWIDTH_FRACTION
    return dram_efficiency(origin), dram_efficiency(target)


def applies(origin: GpuSpec, target: GpuSpec) -> bool:
    """Across architectures only (within one, the wave law is validated to a few %: README "Accuracy"), and only
    between GPUs whose sustained rate is known."""
    return (origin.architecture != target.architecture and np.isfinite(sustained_tflops(origin))
            and np.isfinite(sustained_tflops(target)))


def wave_efficiency(b: ArrayLike, m: ArrayLike, n: ArrayLike, sms: float) -> np.ndarray:
    """Share of the SM-time of the last wave a GEMM of B x M x N output tiles uses: W / ceil(W), 1 at many waves."""
    w = np.asarray(b, float) * np.ceil(np.asarray(m, float) / TILE) * np.ceil(np.asarray(n, float) / TILE) / sms
    return np.where(w > 0, w / np.maximum(np.ceil(w - 1e-9), 1.0), 1.0)


def achievable_ns(flops: ArrayLike, nbytes: ArrayLike, b: ArrayLike, m: ArrayLike, n: ArrayLike,
                  spec: GpuSpec) -> np.ndarray:
    """D_g: the GEMM's time on ``spec`` at its sustained rate with last-wave quantization, or its bytes at the
    achievable DRAM bandwidth, whichever is longer (ns)."""
    rate = sustained_tflops(spec) * 1e3 * wave_efficiency(b, m, n, spec.sms)  # FLOP/ns
    return np.maximum(np.asarray(flops, float) / rate,
                      np.asarray(nbytes, float) / (dram_efficiency(spec) * spec.memory_bandwidth_gbs))


def gemm_ns(flops: ArrayLike, nbytes: ArrayLike, b: ArrayLike, m: ArrayLike, n: ArrayLike, t_origin_ns: ArrayLike,
            origin: GpuSpec, target: GpuSpec, mode: str = "") -> np.ndarray:
    """Target time of FP32 GEMM kernels (``flops``/``nbytes``: the kernel's share of its op's cost); NaN where
    ``applies`` is False."""
    t_o = np.asarray(t_origin_ns, float)
    if not applies(origin, target):
        return np.full(t_o.shape, np.nan)
    d_t = achievable_ns(flops, nbytes, b, m, n, target)
    if (mode or MODE) == DIRECT:
        return d_t
    d_o = achievable_ns(flops, nbytes, b, m, n, origin)
    return t_o * d_t / np.maximum(d_o, 1e-9)

"""The scaling laws, as pure vectorized functions of kernel launch facts and two GPU specs.

Per kernel (origin time T_o, blocks B, blocks per SM o_g from the occupancy rules, SMs S_g):

    waves            W_g = B / (o_g · S_g)                                     (Habitat §4.1)
    compute factor   F_c = max(w(W_t), 1) / max(w(W_o), 1) · r_o / r_t
                     w(W) = W for persistent kernels, ceil(W) for statically scheduled grids
                     r_g = per-SM peak of the kernel's pipe (tensor dtype or FP32) = peak_g / S_g
    memory factor    F_m = BW_o(B) / BW_t(B)
                     BW_g(B) = smoothmin(η · BW_g^datasheet, min(W_g, 1) · S_g · b_sm_g)
    prediction       T_t = T_o · (max(γ · F_m, u · F_c) + (1 − max(γ, u)) · F_c)
                     u = FLOP share of T_o at the pipe's peak (GEMMs; 0 elsewhere: γ·F_m + (1−γ)·F_c)

Where we differ from Habitat (Yu et al., ATC'21, and its wave_scaling/roofline.py): (1) waves are
fractional for persistent kernels (tile schedulers: cuBLAS nvjet, CUTLASS persistent/stream-K, and library
GEMM/attention grids that fit one wave on the origin, sized to its SMs; facts.PERSISTENT_KERNELS), whose
time on the shared 132→64-SM traces tracks W, not ceil W; statically scheduled grids pay for a partial last
wave as Habitat does (ceil W); below one wave a kernel costs one wave;
(2) the memory side is the *achievable* bandwidth of the SMs the kernel occupies (a kernel on a few
SMs cannot pull the whole DRAM bandwidth), measured with benchmarks/microbench/bandwidth_vs_sms.py;
(3) the two sides add as time shares (DRAM overlapping the FLOPs where u is known) instead of
multiplying as powers, so γ = 1 gives exactly the bandwidth law and γ = 0 exactly the wave law;
(4) γ comes from the op's FLOPs/bytes, not counters.
"""
from __future__ import annotations

import numpy as np

# Measured on an H100 SXM (benchmarks/results/bandwidth_vs_sms_h100.json, 2026-11-22) and an H200
# (shared/reference/measured_devices.md):
# a 1 GiB device copy reaches 2947 GB/s of 3350 (0.88) and 4300 of 4800 (0.90).
ACHIEVABLE_BANDWIDTH_FRACTION = 0.89
# Same runs, green contexts: copy moves ~40 B/clk per SM and a 3-operand add ~60 B/clk per SM
# before DRAM saturates (8-32 SMs); we take the middle for an unknown kernel.
SM_BYTES_PER_CLOCK = 50.0
# Exponent of the smooth minimum between the per-SM and the DRAM limits; 3 reproduces the
# measured copy bandwidth at 16, 32, 48, 64 and 100 SMs of an H100 within 6%.
SMOOTHMIN_P = 3.0


def achievable_bandwidth_gbs(sms: float, clock_mhz: float, bandwidth_gbs: float,
                             busy_fraction: np.ndarray, efficiency: float = ACHIEVABLE_BANDWIDTH_FRACTION) -> np.ndarray:
    """DRAM bandwidth a kernel can draw when it keeps ``busy_fraction`` of the SMs busy (``efficiency``: the GPU's
    achievable fraction of its datasheet bandwidth; scale/crossarch.dram_efficiency)."""
    dram = efficiency * bandwidth_gbs
    sm_side = np.maximum(busy_fraction, 1e-9) * sms * SM_BYTES_PER_CLOCK * clock_mhz * 1e-3
    return (dram ** -SMOOTHMIN_P + sm_side ** -SMOOTHMIN_P) ** (-1.0 / SMOOTHMIN_P)


def roofline_ns(flops: np.ndarray | float, nbytes: np.ndarray | float, peak_tflops: np.ndarray | float,
                bandwidth_gbs: np.ndarray | float) -> np.ndarray:
    """Roofline time in ns (Williams et al., CACM 2009): the FLOPs at the pipe's peak or the bytes at the
    achievable DRAM bandwidth, whichever is longer."""
    return np.maximum(np.asarray(flops) / (np.asarray(peak_tflops) * 1e3),
                      np.asarray(nbytes) / (ACHIEVABLE_BANDWIDTH_FRACTION * bandwidth_gbs))


def wave_factor(waves_origin: np.ndarray, waves_target: np.ndarray, persistent: np.ndarray) -> np.ndarray:
    """Ratio of wave counts, one wave at least. Statically scheduled grids pay for a partial last
    wave as for a full one (ceil, as Habitat); persistent kernels with a tile scheduler spread the
    tiles over the SMs they get, so their waves are fractional (see module doc)."""
    w_o = np.where(persistent, waves_origin, np.ceil(waves_origin - 1e-9))
    w_t = np.where(persistent, waves_target, np.ceil(waves_target - 1e-9))
    return np.maximum(w_t, 1.0) / np.maximum(w_o, 1.0)


def combine(t_origin: np.ndarray, gamma: np.ndarray, f_mem: np.ndarray, f_comp: np.ndarray,
            flop_share: np.ndarray | float = 0.0) -> np.ndarray:
    """T_t from the time shares of the origin: γ·T_o waiting on DRAM, u·T_o issuing FLOPs at the pipe's
    peak (``flop_share``), the rest SM-side latency. DRAM traffic and FLOPs overlap (roofline: the
    kernel takes the longer of the two, Williams et al., CACM 2009; NeuSight's per-wave bound), the rest
    adds: T_t = T_o · (max(γ·F_m, u·F_c) + (1 − max(γ, u))·F_c). With u = 0 (FLOPs unknown, or a
    streaming kernel) this is the additive law γ·F_m + (1 − γ)·F_c."""
    u = np.clip(np.nan_to_num(np.asarray(flop_share, dtype=np.float64), nan=0.0), 0.0, 1.0)
    g = np.clip(gamma, 0.0, 1.0)
    return t_origin * (np.maximum(g * f_mem, u * f_comp) + (1.0 - np.maximum(g, u)) * f_comp)

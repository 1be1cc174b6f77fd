"""GEMM time ratio t_target / t_origin from a small MLP, in numpy (no torch at predict time).

Contract: ``features(...)`` turns GEMM shapes, the origin's measured time and two GPUs' spec vectors into the
model's input matrix; ``predict_ratio(...)`` returns the ratio, never below the target's roofline:
t_target >= max(FLOPs / peak, bytes / bandwidth) with the datasheet peak and bandwidth (physics, no fudge).
The network predicts a log2 correction to the peak-FP32 ratio; weights come from benchmarks/learned/train_gemm.py.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from habitat_trace.scale.gpu import GpuSpec

WEIGHTS = Path(__file__).resolve().parent / "gemm_fp32.npz"
DTYPE_BYTES = {"fp32": 4}
# cuBLAS SGEMM kernels tile the output in 32..128-wide tiles; 128x128 gives a wave count that tracks the
# big kernels (tiles / SMs), the network learns the rest from the dims.
TILE = 128
# TDP: the T4 and P4 (70-75 W) cannot hold their boost clock under a sustained SGEMM; without it the
# leave-one-GPU-out error on the P4 was 134% instead of 20% (benchmarks/learned/eval_logo.py, 2026-11-22)
GPU_FIELDS = ("sms", "boost_clock_mhz", "memory_bandwidth_gbs", "l2_cache_mib", "peak_tflops", "tdp_w")
ALL_FEATURES = ("log_b", "log_m", "log_n", "log_k", "log_flops", "log_bytes", "log_intensity", "log_t_origin_us",
            "log_origin_over_roofline", "log_tiles_per_sm_origin", "log_tiles_per_sm_target", "log_ceil_wave_ratio",
            "log_roofline_ratio", *(f"log_ratio_{f}" for f in GPU_FIELDS))
# Features to leave out. Measured (leave-one-GPU-out, 2026-11-22): dropping the L2 ratio (the A100's 40 MB is
# 7x anything else) helps the A100 (29.5% -> 21.2%) but hurts the P4 (20% -> 41%) and T4 (32% -> 50%): kept.
DROPPED: tuple[str, ...] = ()
FEATURES = tuple(f for f in ALL_FEATURES if f not in DROPPED)
_KEEP = [ALL_FEATURES.index(f) for f in FEATURES]


def gpu_vector(spec: GpuSpec, dtype: str = "fp32") -> np.ndarray:
    """The spec fields the model reads, in ``GPU_FIELDS`` order (peak: the dtype's pipe)."""
    peak = spec.fp32_tflops if dtype == "fp32" else spec.tensor_peak_tflops(dtype)
    return np.array([spec.sms, spec.boost_clock_mhz, spec.memory_bandwidth_gbs, spec.l2_cache_mib, peak,
                     spec.tdp_w], float)


def gemm_cost(b, m, n, k, dtype: str = "fp32") -> tuple[np.ndarray, np.ndarray]:
    """FLOPs (2·B·M·N·K) and compulsory DRAM bytes (A, B and C once each) of a batched GEMM."""
    b, m, n, k = (np.asarray(x, dtype=np.float64) for x in (b, m, n, k))
    return 2.0 * b * m * n * k, DTYPE_BYTES[dtype] * b * (m * k + k * n + m * n)


def roofline_ms(flops: np.ndarray, nbytes: np.ndarray, gpu: np.ndarray) -> np.ndarray:
    """Lower bound on a kernel's time in ms on ``gpu`` (a ``gpu_vector``, or rows of them)."""
    gpu = np.asarray(gpu, dtype=np.float64)
    return np.maximum(flops / (gpu[..., 4] * 1e9), nbytes / (gpu[..., 2] * 1e6))


def features(b, m, n, k, t_origin_ms, origin: np.ndarray, target: np.ndarray, dtype: str = "fp32") -> np.ndarray:
    """Input matrix (n, len(FEATURES)), columns in ``FEATURES`` order; ``origin``/``target`` are gpu_vectors
    (one, or one row per GEMM)."""
    b, m, n, k, t_o = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (b, m, n, k, t_origin_ms)))
    o = np.broadcast_to(np.asarray(origin, dtype=np.float64), b.shape + (len(GPU_FIELDS),))
    t = np.broadcast_to(np.asarray(target, dtype=np.float64), b.shape + (len(GPU_FIELDS),))
    flops, nbytes = gemm_cost(b, m, n, k, dtype)
    roof_o, roof_t = roofline_ms(flops, nbytes, o), roofline_ms(flops, nbytes, t)
    tiles = b * np.ceil(m / TILE) * np.ceil(n / TILE)
    waves_o, waves_t = tiles / o[..., 0], tiles / t[..., 0]
    cols = [np.log2(b), np.log2(m), np.log2(n), np.log2(k), np.log2(flops), np.log2(nbytes), np.log2(flops / nbytes),
            np.log2(t_o * 1e3), np.log2(t_o / roof_o), np.log2(waves_o), np.log2(waves_t),
            np.log2(np.maximum(np.ceil(waves_t), 1) / np.maximum(np.ceil(waves_o), 1)), np.log2(roof_t / roof_o)]
    cols += [np.log2(t[..., i] / o[..., i]) for i in range(len(GPU_FIELDS))]
    return np.stack(cols, axis=-1)[..., _KEEP]


def baseline_log2_ratio(x: np.ndarray) -> np.ndarray:
    """log2 of the peak-FP32 ratio origin/target: the prior the network corrects."""
    return -x[..., FEATURES.index("log_ratio_peak_tflops")]


@dataclass(frozen=True)
class Mlp:
    mean: np.ndarray
    std: np.ndarray
    weights: tuple[np.ndarray, ...]  # W0, b0, W1, b1, ..., last layer linear
    meta: str

    def log2_correction(self, x: np.ndarray) -> np.ndarray:
        h = (x - self.mean) / self.std
        layers = list(zip(self.weights[::2], self.weights[1::2]))
        for w, bias in layers[:-1]:
            z = h @ w + bias
            h = z / (1.0 + np.exp(-z))  # SiLU, as in training
        w, bias = layers[-1]
        return (h @ w + bias)[..., 0]


@functools.lru_cache(maxsize=4)
def load(path: Path = WEIGHTS) -> Mlp:
    with np.load(path, allow_pickle=False) as z:
        if tuple(str(f) for f in z["features"]) != FEATURES:
            raise ValueError(f"{path}: trained on other features than this code computes; retrain it")
        n = int(z["n_layers"])
        return Mlp(z["mean"], z["std"], tuple(z[f"{p}{i}"] for i in range(n) for p in ("w", "b")), str(z["meta"]))


def predict_ratio(x: np.ndarray, floor_ratio: np.ndarray, model: Mlp | None = None) -> np.ndarray:
    """t_target / t_origin for feature rows ``x``, at least ``floor_ratio`` (target roofline / t_origin)."""
    model = model or load()
    r = np.exp2(baseline_log2_ratio(x) + model.log2_correction(x))
    return np.maximum(r, floor_ratio)


def predict_target_ms(b, m, n, k, t_origin_ms, origin: np.ndarray, target: np.ndarray, dtype: str = "fp32",
                      model: Mlp | None = None) -> np.ndarray:
    """Predicted time on the target in ms, never below its roofline."""
    x = features(b, m, n, k, t_origin_ms, origin, target, dtype)
    flops, nbytes = gemm_cost(*np.broadcast_arrays(b, m, n, k), dtype)
    t_o = np.broadcast_to(np.asarray(t_origin_ms, dtype=np.float64), flops.shape)
    floor = roofline_ms(flops, nbytes, np.broadcast_to(target, flops.shape + (len(GPU_FIELDS),))) / t_o
    return t_o * predict_ratio(x, floor, model)

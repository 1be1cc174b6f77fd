"""GEMM time ratios between two real GPUs that both have host-free microbenchmarks (method ``learned-microbench``).

Contract: ``covers(origin, target)`` is True when both are catalog products (no ``base =``) with a table in
``microbench_gemm.npz``; ``gemm_time_ratios(b, m, n, k, dtype, origin, target, t_origin_ns)`` returns
t_target / t_origin per GEMM (NaN outside the measured shapes or dtypes), floored at the target's roofline.
The ratio is the distance-weighted mean of log(t_target / t_origin) over the ``NEIGHBOURS`` nearest measured shapes
of the same dtype in log2 (B, M, N, K) space; both GPUs ran the same shapes (benchmarks/collect/queued_retime.py),
so each neighbour is a measured ratio, not a model of either GPU. Numpy only: no torch at predict time.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Optional

import numpy as np

from habitat_trace.scale import wave
from habitat_trace.scale.gpu import GpuSpec

TABLE = Path(__file__).with_name("microbench_gemm.npz")
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")  # fp32: CUDA-core SGEMM; tf32..fp8: tensor-core pipes
BYTES_PER_ELEMENT = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
# Leave-one-out over the 2,376 paired H100/H200 shapes (fit_microbench.py --check, 2026-11-23): time-weighted
# |error| 2.7% at k = 1, 3.0% at 2, 3.2% at 4, 3.8% at 16 (ratio 1 everywhere: 2.8%); more neighbours average
# the compute-bound shapes (ratio ~1) into the DRAM-bound ones (ratio ~0.73, the bandwidth ratio).
NEIGHBOURS = 1
# inverse-distance weights 1 / (d + D0)^2 (Shepard 1968): D0 keeps an exact match from taking all the weight
WEIGHT_OFFSET_LOG2 = 0.5
# farther than this (log2 units, Euclidean over B, M, N, K: one dim 4x off) from every measured shape: out of
# domain, the wave law stays. Set from the sampling density (random shapes are log-uniform over 2^4..2^14), not
# from trace results.
MAX_LOG2_DISTANCE = 2.0


def features(b, m, n, k) -> np.ndarray:
    """log2 (B, M, N, K), one row per GEMM."""
    return np.log2(np.maximum(np.stack([np.asarray(v, dtype=np.float64) for v in (b, m, n, k)], axis=-1), 1.0))


def knn_log_ratio(x_train: np.ndarray, y_train: np.ndarray, x_query: np.ndarray, k: int = NEIGHBOURS,
                  return_distance: bool = False):
    """Inverse-distance-weighted mean of ``y_train`` over the k nearest rows of ``x_train`` per query row."""
    d = np.sqrt(((x_query[:, None, :] - x_train[None, :, :]) ** 2).sum(-1))
    k = min(k, x_train.shape[0])
    idx = np.argpartition(d, k - 1, axis=1)[:, :k]
    dk = np.take_along_axis(d, idx, axis=1)
    w = 1.0 / (dk + WEIGHT_OFFSET_LOG2) ** 2
    y = (y_train[idx] * w).sum(1) / w.sum(1)
    return (y, dk.min(1)) if return_distance else y


@functools.lru_cache(maxsize=1)
def _tables() -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """device name -> dtype -> (bmnk int rows, time ms)."""
    z = np.load(TABLE)
    out: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    i = 0
    while f"device_{i}" in z:
        codes, bmnk, ms = z[f"dtype_{i}"], z[f"bmnk_{i}"], z[f"ms_{i}"].astype(np.float64)
        out[str(z[f"device_{i}"])] = {dt: (bmnk[codes == c], ms[codes == c]) for c, dt in enumerate(DTYPES)}
        i += 1
    return out


def device_of(spec: GpuSpec) -> Optional[str]:
    """The measured device a catalog GPU is; None for what-if variants (``base =``) and unmeasured GPUs."""
    if spec.base is not None:
        return None
    return next((d for d in spec.device_names if d in _tables()), None)


def covers(origin: GpuSpec, target: GpuSpec) -> bool:
    return device_of(origin) is not None and device_of(target) is not None


@functools.lru_cache(maxsize=32)
def _paired(origin: str, target: str, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Features and log(t_target / t_origin) of the shapes both devices ran in ``dtype``."""
    (ko, to), (kt, tt) = _tables()[origin][dtype], _tables()[target][dtype]
    key_o = {tuple(r): t for r, t in zip(ko.tolist(), to.tolist())}
    rows = [(r, key_o[tuple(r)], t) for r, t in zip(kt.tolist(), tt.tolist()) if tuple(r) in key_o]
    if not rows:
        return np.zeros((0, 4)), np.zeros(0)
    bmnk = np.array([r for r, _, _ in rows], dtype=np.float64)
    y = np.log(np.array([t for _, _, t in rows]) / np.array([t for _, t, _ in rows]))
    return features(*bmnk.T), y


def gemm_time_ratios(b, m, n, k, dtype: str, origin: GpuSpec, target: GpuSpec, t_origin_ns) -> np.ndarray:
    """t_target / t_origin per GEMM (B x [M x K] @ [K x N] in ``dtype`` that took ``t_origin_ns``), NaN out of
    domain; never below the target's roofline (FLOPs at the pipe's peak, bytes at the achievable bandwidth)."""
    b, m, n, k, t = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (b, m, n, k, t_origin_ns)))
    out = np.full(b.shape, np.nan)
    do, dt = device_of(origin), device_of(target)
    if do is None or dt is None or dtype not in DTYPES or not b.size:
        return out
    if do == dt:
        ratio = np.ones(b.shape)
    else:
        x_train, y_train = _paired(do, dt, dtype)
        if not len(y_train):
            return out
        y, dist = knn_log_ratio(x_train, y_train, features(b, m, n, k).reshape(-1, 4), return_distance=True)
        ratio = np.where(dist <= MAX_LOG2_DISTANCE, np.exp(y), np.nan).reshape(b.shape)
    flops = 2.0 * b * m * n * k
    nbytes = BYTES_PER_ELEMENT[dtype] * b * (m * k + k * n + m * n)
    floor_ns = wave.roofline_ns(flops, nbytes, target.pipe_peak_tflops(dtype), target.memory_bandwidth_gbs)
    ok = np.isfinite(t) & (t > 0)
    return np.where(ok, np.maximum(ratio, floor_ns / np.where(ok, t, 1.0)), np.nan)

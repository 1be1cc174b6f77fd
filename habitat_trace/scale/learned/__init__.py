"""Learned GEMM time ratios (issue 6): the hook the scale engine calls for library GEMM kernels.

Contract: ``gemm_time_ratio(m, n, k, batch, dtype, origin, target, t_origin_ns)`` returns t_target / t_origin for
one GEMM, or None when the GEMM is outside the model's domain (a dtype without training data, dims outside the
measured range, a GPU whose process node is unknown); ``gemm_time_ratios`` is the vectorized form (NaN where out
of domain). Never below the target's roofline; exactly 1 (or the roofline) when origin and target have the same
specs. Pure numpy: importing this package does not import torch (tests/test_learned.py checks it).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from numpy.typing import ArrayLike

from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.learned import model as M

# dtypes with training data: NeuSight's FP32 SGEMM only, until the H100/H200 collector's data exist
TRAINED_DTYPES = ("fp32",)
# measured range of the NeuSight shapes (B 1..1025, M 3..8192, N and K 1..65519), with 2x slack: beyond it
# the network extrapolates in log space, which we do not trust
MAX_DIM = 2 * 65536
MAX_BATCH = 2 * 1025
MIN_T_ORIGIN_NS = 1_000  # NeuSight's fastest kernel is ~29 us; below 1 us the timing features are out of range


def gemm_time_ratios(m: ArrayLike, n: ArrayLike, k: ArrayLike, batch: ArrayLike, dtype: str, origin: GpuSpec,
                     target: GpuSpec, t_origin_ns: ArrayLike) -> np.ndarray:
    """Vectorized ``gemm_time_ratio``: one ratio per GEMM, NaN where out of domain."""
    m, n, k, b, t = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (m, n, k, batch, t_origin_ns)))
    o, g = M.gpu_vector(origin, dtype), M.gpu_vector(target, dtype)
    if dtype not in TRAINED_DTYPES or not (np.isfinite(o).all() and np.isfinite(g).all()):
        return np.full(m.shape, np.nan)
    ok = ((m >= 1) & (n >= 1) & (k >= 1) & (b >= 1) & (np.maximum(np.maximum(m, n), k) <= MAX_DIM)
          & (b <= MAX_BATCH) & (t >= MIN_T_ORIGIN_NS) & np.isfinite(t))
    one = np.where(ok, 1.0, np.nan)
    mm, nn, kk, bb, tt = (np.where(ok, v, d) for v, d in ((m, 1), (n, 1), (k, 1), (b, 1), (t, MIN_T_ORIGIN_NS)))
    t_ms = tt * 1e-6
    if np.array_equal(o, g):  # same specs: same time, whatever the network would say
        flops, nbytes = M.gemm_cost(bb, mm, nn, kk, dtype)
        return one * np.maximum(t_ms, M.roofline_ms(flops, nbytes, g)) / t_ms
    return one * M.predict_target_ms(bb, mm, nn, kk, t_ms, o, g, dtype) / t_ms


def gemm_time_ratio(m: int, n: int, k: int, batch: int, dtype: str, origin: GpuSpec, target: GpuSpec,
                    t_origin_ns: float) -> Optional[float]:
    """t_target / t_origin of one (batched) GEMM C[b] = A[b] (m x k) @ B[b] (k x n) that took ``t_origin_ns``
    on ``origin``; None when out of the model's domain (then use the wave law)."""
    r = float(gemm_time_ratios(m, n, k, batch, dtype, origin, target, t_origin_ns).reshape(-1)[0])
    return None if np.isnan(r) else r

"""Learned GEMM time ratios (issue 6): the hook the scale engine calls for library GEMM kernels.

Contract: ``gemm_time_ratios(m, n, k, batch, dtype, origin, target, t_origin_ns)`` returns t_target / t_origin per
GEMM C[batch] (m x n) = A (m x k) @ B (k x n), the order cost.gemm_dims gives a trace's GEMM (NeuSight's training
tuples name the reduction N: benchmarks/learned/training/data.py maps them), NaN where the GEMM is outside the
model's domain (a dtype without training data, dims or origin time outside the trained range, a GPU whose process
node is unknown). Never below the target's roofline; exactly 1 (or the roofline) when origin and target have the
same specs. Pure numpy: importing this package does not import torch (tests/test_learned.py checks it).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.learned import model as M

# dtypes with training data: NeuSight's FP32 SGEMM only, until the H100/H200 collector's data exist
TRAINED_DTYPES = ("fp32",)
# The range of the NeuSight GEMMs the shipped model was trained on (benchmarks/learned/training/data.py
# load_neusight over ../shared/data/neusight, in this order; tests/test_wild.py checks these against the data): B, M,
# N, K and the origin time. Outside it the network extrapolates (issue 18: a 6 us 512x512x16 V100 GEMM, 5x faster than
# any trained kernel, came out 3x slower on an A100), so the engine keeps the wave law there.
TRAINED_DIMS = {"b": (1, 1025), "m": (3, 8192), "n": (2, 65519), "k": (1, 65371)}
MIN_T_ORIGIN_NS = 28_330  # the fastest trained kernel (a P4), 28.33 us
MAX_T_ORIGIN_NS = 10_380_198_242  # the slowest (a P4), 10.38 s


def gemm_time_ratios(m: ArrayLike, n: ArrayLike, k: ArrayLike, batch: ArrayLike, dtype: str, origin: GpuSpec,
                     target: GpuSpec, t_origin_ns: ArrayLike) -> np.ndarray:
    """One ratio per GEMM, NaN where out of domain (module doc)."""
    m, n, k, b, t = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (m, n, k, batch, t_origin_ns)))
    o, g = M.gpu_vector(origin, dtype), M.gpu_vector(target, dtype)
    if dtype not in TRAINED_DTYPES or not (np.isfinite(o).all() and np.isfinite(g).all()):
        return np.full(m.shape, np.nan)
    ok = (t >= MIN_T_ORIGIN_NS) & (t <= MAX_T_ORIGIN_NS) & np.isfinite(t)
    for v, (lo, hi) in zip((b, m, n, k), TRAINED_DIMS.values()):
        ok &= (v >= lo) & (v <= hi)
    one = np.where(ok, 1.0, np.nan)
    mm, nn, kk, bb, tt = (np.where(ok, v, d) for v, d in ((m, 1), (n, 1), (k, 1), (b, 1), (t, MIN_T_ORIGIN_NS)))
    t_ms = tt * 1e-6
    if np.array_equal(o, g):  # same specs: same time, whatever the network would say
        flops, nbytes = M.gemm_cost(bb, mm, nn, kk, dtype)
        return one * np.maximum(t_ms, M.roofline_ms(flops, nbytes, g)) / t_ms
    return one * M.predict_target_ms(bb, mm, nn, kk, t_ms, o, g, dtype) / t_ms

"""What the scaling engine hands to emit: one predicted duration and method per GPU event.

Emit lays out the timeline from these and never recomputes a prediction.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from habitat_trace.scale.gpu import GpuSpec

# method names recorded per GPU event (trace args, inspect/explain)
IDENTITY = "identity"  # target == origin
WAVE = "wave"  # wave scaling with gamma from the op's cost model
ROOFLINE_OP = "roofline-op"  # library kernel (GEMM/conv/attention) scaled by a roofline bound
LEARNED = "learned"  # library GEMM predicted by the learned model (scale/learned), roofline-bounded
COPY = "copy"  # memcpy/memset: bandwidth ratio
FALLBACK = "fallback"  # launch parameters missing: class-level rule (reason says why)
BANDWIDTH = "bandwidth"  # across vendors, non-library kernels: DRAM bandwidth and vector peak ratios (scale/vendor.py)
METHODS = (IDENTITY, WAVE, ROOFLINE_OP, LEARNED, COPY, FALLBACK, BANDWIDTH)


@dataclass(frozen=True)
class Prediction:
    origin: GpuSpec
    target: GpuSpec
    dur_ns: np.ndarray  # int64, aligned with trace.gpu rows, every value >= 1
    method: np.ndarray  # str, one of METHODS
    reason: np.ndarray  # str, why a fallback was taken ("" otherwise)
    warnings: tuple[str, ...] = ()

    def method_counts(self) -> dict[str, int]:
        names, counts = np.unique(self.method, return_counts=True)
        return {str(n): int(c) for n, c in zip(names, counts)}

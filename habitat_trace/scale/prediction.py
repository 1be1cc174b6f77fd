"""What the scaling engine hands to emit: one predicted duration and method per GPU event.

Emit lays out the timeline from these and never recomputes a prediction.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from habitat_trace.scale.gpu import GpuSpec

# method names recorded per GPU event (trace args, inspect/explain)
IDENTITY = "identity"  # target == origin
WAVE = "wave"  # wave scaling with gamma from the op's cost model
ROOFLINE_OP = "roofline-op"  # library kernel (GEMM/conv/attention) scaled by a roofline bound
LEARNED = "learned"  # library GEMM predicted by the learned model (scale/learned), roofline-bounded
SUSTAINED = "sustained"  # FP32 GEMM across architectures from the GPUs' sustained rates (scale/crossarch)
COPY = "copy"  # memcpy/memset: bandwidth ratio
FALLBACK = "fallback"  # launch parameters missing or invalid: many-wave grid assumed (reason says why)
COLLECTIVE = "collective"  # NCCL kernel: NCCL's alpha-beta model over the interconnects (scale/collective.py)
COLLECTIVE_MEASURED = "collective-measured"  # NCCL kernel the model cannot price: measured time kept (reason)
BANDWIDTH = "bandwidth"  # across vendors, non-library kernels: DRAM bandwidth and vector peak ratios (scale/vendor.py)
# kernels a data-parallel scale-out adds to a one-GPU step (scale/dataparallel.py, timeline/scaleout.py): a
# collective priced by NCCL's model, and the copies DDP/FSDP add (bytes at the achievable DRAM bandwidth)
COLLECTIVE_SYNTHESIZED = "collective-synthesized"
COPY_SYNTHESIZED = "copy-synthesized"
METHODS = (IDENTITY, WAVE, ROOFLINE_OP, LEARNED, SUSTAINED, COPY, FALLBACK, BANDWIDTH, COLLECTIVE,
           COLLECTIVE_MEASURED, COLLECTIVE_SYNTHESIZED, COPY_SYNTHESIZED)


@dataclass(frozen=True)
class KernelFacts:
    """What the engine knows of each GPU event (arrays aligned with the trace's GPU rows): the inputs of its laws."""

    has_params: np.ndarray  # bool: valid grid and block recorded
    pipe: np.ndarray  # str: "fp32" (CUDA cores) or the tensor dtype the kernel runs on
    waves_origin: np.ndarray  # float: grid / (SMs x blocks per SM) on each GPU
    waves_target: np.ndarray
    bw_origin: np.ndarray  # float GB/s: achievable DRAM bandwidth at the kernel's wave fill
    bw_target: np.ndarray
    rate_ratio: np.ndarray  # float: per-SM peak of the pipe, origin / target
    gamma: np.ndarray  # float in [0, 1]: share of the origin time the DRAM was busy
    flop_share: np.ndarray  # float: u, share of a GEMM's origin time its FLOPs need at the pipe's peak
    roofline_floor_ns: np.ndarray  # float: target roofline time of the kernel's share of its op (NaN unknown)
    f_mem: np.ndarray  # float: memory-side time factor F_m (docs/method.md steps 2-3)
    f_comp: np.ndarray  # float: compute-side time factor F_c
    pipe_target: np.ndarray  # str: the pipe the kernel runs on on the target (GpuSpec.tensor_pipe: fp8 -> bf16 ...)
    width: np.ndarray  # float: element-size ratio target/origin of a substituted pipe (1 elsewhere)
    flops: np.ndarray  # float: the kernel's share of its op's FLOPs (NaN unknown)
    nbytes: np.ndarray  # float: the kernel's share of its op's bytes (NaN unknown)


@dataclass(frozen=True)
class Prediction:
    origin: GpuSpec
    target: GpuSpec
    dur_ns: np.ndarray  # int64, aligned with trace.gpu rows, every value >= 1
    method: np.ndarray  # str, one of METHODS
    reason: np.ndarray  # str, why a fallback was taken ("" otherwise)
    warnings: tuple[str, ...] = ()
    facts: Optional[KernelFacts] = None  # the laws' inputs (None for the identity: nothing was scaled)

    def method_counts(self) -> dict[str, int]:
        names, counts = np.unique(self.method, return_counts=True)
        return {str(n): int(c) for n, c in zip(names, counts)}

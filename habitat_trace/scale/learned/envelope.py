"""Where ``scale`` may use the learned GEMM model: between two real GPUs inside the spec range it was trained on.

Contract: ``covers(spec)`` is True when ``spec`` is a catalog product (not a what-if variant derived with
``base =``) whose FP32 peak, DRAM bandwidth and SM count each lie within ``SLACK`` x the range of the GPUs
in ``TRAINED_ON``. Outside, the engine keeps the wave law:
- what-if variants ask "the same chip with fewer SMs / more bandwidth"; the library keeps its kernels there
  (our green-context microbenchmarks: same cuBLAS grids at 132, 100, 64 and 48 SMs), which is the wave law's
  premise and what the in-step traces validate (benchmarks/results/accuracy.md); so the engine predicts a what-if's
  FP32 GEMMs on its base with the model and moves them to the what-if by that law (engine._via_base);
- beyond the trained range the network extrapolates: on the H100/H200 traces' FP32 GEMMs (FP32 peak 3.4x the
  A100's) its time-weighted error was 82-420% per workload where the wave law's is 2-15% (README, "Learned GEMM
  model").
SLACK: the leave-one-GPU-out folds the model is judged by already extrapolate this far (held-out A100: its
bandwidth is 1.73x the V100's, its FP32 peak 1.39x; held-out P4: FP32 peak 1/1.47 of the T4's), so 1.5x stays
within what benchmarks/results/learned_logo.md measured.
"""
from __future__ import annotations

import functools

import numpy as np

from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.learned import model as M

# the GPUs of the NeuSight data the shipped model was trained on (benchmarks/learned/train_gemm.py)
TRAINED_ON = ("P100 PCIe 16GB", "P4", "T4", "V100 PCIe 32GB", "A100 PCIe 40GB")
# TDP is not checked: the model reads it only through the sustained-clock fraction min(1, headroom / knee),
# which is already 1 for the 250 W GPUs of the training set, so a higher TDP changes nothing
FIELDS = ("fp32_tflops", "memory_bandwidth_gbs", "sms")
SLACK = 1.5


# FIELDS of each TRAINED_ON GPU as specs/gpus.toml gives them (sources there); copied so that the scale layer reads
# no catalog file at predict time; tests/test_learned_scale.py fails when the catalog and this table disagree
TRAINED_VALUES = {
    "P100 PCIe 16GB": (9.3, 732.0, 56),
    "P4": (5.5, 192.0, 20),
    "T4": (8.1, 320.0, 40),
    "V100 PCIe 32GB": (14.0, 900.0, 80),
    "A100 PCIe 40GB": (19.5, 1555.0, 108),
}


@functools.lru_cache(maxsize=1)
def trained_range() -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per ``FIELDS`` over ``TRAINED_ON``, widened by ``SLACK``."""
    values = np.array([TRAINED_VALUES[g] for g in TRAINED_ON], dtype=np.float64)
    return values.min(axis=0) / SLACK, values.max(axis=0) * SLACK


def covers(spec: GpuSpec) -> bool:
    # trained on NVIDIA CUDA-core SGEMMs only: an AMD GPU (another library, matrix-core FP32) is outside
    if spec.base is not None or spec.vendor != "nvidia" or np.isnan(M.process_nm(spec)):
        return False
    low, high = trained_range()
    v = np.array([float(getattr(spec, f)) for f in FIELDS])
    return bool(((v >= low) & (v <= high)).all())

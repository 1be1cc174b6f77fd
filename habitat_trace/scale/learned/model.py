"""GEMM time ratio t_target / t_origin: a physics baseline (peak ratio x TDP-limited clock) times a learned
correction from a small MLP ensemble, in numpy (no torch at predict time).

Contract: ``predict_target_ms(b, m, n, k, t_origin_ms, origin, target)`` returns the target's time in ms, never
below its roofline max(FLOPs / peak, bytes / bandwidth) with the datasheet peak and bandwidth, and never beyond
the physics baseline by more than the training data measured (CORRECTION_LOG2_RANGE). ``origin`` and
``target`` are ``gpu_vector``s; the inputs are the GEMM's dims, the origin's measured time and catalog specs,
nothing measured on the target. Weights come from benchmarks/learned/train_gemm.py.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from habitat_trace.scale.cost import gemm_flops_bytes
from habitat_trace.scale.gpu import GpuSpec

WEIGHTS = Path(__file__).resolve().parent / "gemm_fp32.npz"
DTYPE_BYTES = {"fp32": 4}
# Output tile for the wave count: cuBLAS SGEMM kernels tile C in 32..128-wide tiles (the NeuSight kernel names);
# 128x128 gives waves = tiles / SMs that track the big kernels. The target's own kernel is unknown, so one
# fixed tile is used on both GPUs and the network learns the rest.
TILE = 128

# Process node by chip (name prefix, first match wins), for the power model below. Sources: NVIDIA Pascal
# (Tesla P100) whitepaper "16 nm FinFET" (GP10x); Volta (V100) and Turing whitepapers "TSMC 12 nm FFN"; A100
# whitepaper "TSMC 7 nm N7"; Ampere GA102 whitepaper "Samsung 8 nm 8N"; Ada (AD102) and H100 whitepapers
# "TSMC 4N"; Blackwell technical brief "TSMC 4NP". AMD (compute dies): AnandTech's MI210 launch table (MI100
# Arcturus "TSMC 7nm", MI210/MI250 Aldebaran "TSMC N6"); MI300X/MI325X XCDs TSMC 5 nm (awesomeagents.ai MI325X
# table, unverified); ROCm docs MI350 microarchitecture (CDNA4 XCDs "TSMC's N3P"). The learned model never runs on
# AMD GPUs (envelope.covers); the nodes keep the catalog complete.
PROCESS_NM = (("GP1", 16.0), ("GV1", 12.0), ("TU1", 12.0), ("GA100", 7.0), ("GA10", 8.0), ("AD1", 4.0),
              ("GH1", 4.0), ("GB", 4.0), ("Arcturus", 7.0), ("Aldebaran", 6.0), ("Aqua Vanjaram", 5.0),
              ("gfx950", 3.0))

# TDP-limited clock. Dynamic energy per operation scales about linearly with the feature size (C V^2 with C ~
# nm and V nearly flat from 16 to 4 nm; TSMC quotes -60% power 16FF+ -> N7 at equal speed, 7/16 = 0.44), so
# the power a GPU needs to hold its peak is ~ peak x nm, and headroom = TDP / (peak_TFLOPS x nm) says how far
# its TDP covers that. 250 W parts have 1.5..1.8 (V100 PCIe, P100 PCIe, A100 PCIe), the 70-75 W T4 and P4 0.7
# and 0.85: NeuSight's T4 runs big SGEMMs at ~0.4 of its FP32 peak, the V100 at ~0.85. Below the knee the
# sustained clock is headroom / knee of boost. The knee (a round number between the two groups), the onset
# and its width are three global constants chosen by hand and checked leave-one-GPU-out (see
# benchmarks/results/learned_logo.md); nothing is fitted per GPU.
HEADROOM_KNEE = 1.3  # W / (TFLOP/s x nm)
# The clock drops only once a kernel runs long enough for the power controller to act: NeuSight's T4 and P4
# are near boost clock below ~0.1 ms and at the sustained clock by a few ms (benchmarks/results/learned_logo.md).
THROTTLE_ONSET_MS = 0.5
THROTTLE_WIDTH_OCTAVES = 1.0

# The learned correction (log2 of the measured ratio over the physics baseline) stays inside the range the
# training data measured: over every ordered pair of the five NeuSight GPUs and every shape measured on all of
# them (training.data.joined), log2(t_target / t_origin) - baseline_log2_ratio spans -4.39 .. +4.29
# (tests/test_wild.py recomputes it). So a prediction is bounded on both sides: below by the target's roofline,
# above by the physics baseline times the largest slowdown over it any trained pair showed (19.6x), never by
# what the network says outside its data (issue 18).
CORRECTION_LOG2_RANGE = (-4.39, 4.29)

GPU_FIELDS = ("sms", "peak_tflops", "memory_bandwidth_gbs", "tdp_w", "process_nm")
_SMS, _PEAK, _BW, _TDP, _NM = range(len(GPU_FIELDS))
FEATURES = ("log_t_origin_us", "log_origin_over_roofline", "log_intensity", "log_tiles_per_sm_target",
            "log_tiles_per_sm_origin", "log_ceil_wave_ratio", "log_ratio_bandwidth", "log_ratio_peak",
            "log_ratio_sustained_peak")


def process_nm(spec: GpuSpec) -> float:
    """Process node in nm of the GPU's chip (catalog ``chip``), NaN when the chip is not in ``PROCESS_NM``."""
    chip = str(spec.extra.get("chip", ""))
    return next((nm for prefix, nm in PROCESS_NM if chip.startswith(prefix)), float("nan"))


def gpu_vector(spec: GpuSpec, dtype: str = "fp32") -> np.ndarray:
    """The spec fields the model reads, in ``GPU_FIELDS`` order (peak: the dtype's pipe)."""
    peak = spec.pipe_peak_tflops(dtype)
    return np.array([spec.sms, peak, spec.memory_bandwidth_gbs, spec.tdp_w, process_nm(spec)], float)


def gemm_cost(b: ArrayLike, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "fp32") -> tuple[np.ndarray, np.ndarray]:
    """FLOPs (2·B·M·N·K) and compulsory DRAM bytes (A, B and C once each) of a batched GEMM."""
    return gemm_flops_bytes(b, m, n, k, DTYPE_BYTES[dtype])


def roofline_ms(flops: np.ndarray, nbytes: np.ndarray, gpu: np.ndarray) -> np.ndarray:
    """Lower bound on a kernel's time in ms on ``gpu`` (a ``gpu_vector``, or rows of them)."""
    gpu = np.asarray(gpu, dtype=np.float64)
    return np.maximum(flops / (gpu[..., _PEAK] * 1e9), nbytes / (gpu[..., _BW] * 1e6))


def sustained_fraction(gpu: np.ndarray) -> np.ndarray:
    """Fraction of boost clock a GPU holds under a long SGEMM: min(1, headroom / knee) (see HEADROOM_KNEE)."""
    gpu = np.asarray(gpu, dtype=np.float64)
    headroom = gpu[..., _TDP] / (gpu[..., _PEAK] * gpu[..., _NM])
    return np.minimum(1.0, headroom / HEADROOM_KNEE)


def clock_fraction(gpu: np.ndarray, duration_ms: ArrayLike) -> np.ndarray:
    """Fraction of boost clock for a kernel of ``duration_ms``: boost for short kernels, the sustained fraction
    for long ones, a logistic step in log2(duration) between them."""
    octaves = np.log2(np.asarray(duration_ms, dtype=np.float64) / THROTTLE_ONSET_MS) / THROTTLE_WIDTH_OCTAVES
    onset = 1.0 / (1.0 + np.exp(-octaves))
    return 1.0 - (1.0 - sustained_fraction(gpu)) * onset


def baseline_log2_ratio(t_origin_ms: ArrayLike, origin: np.ndarray, target: np.ndarray) -> np.ndarray:
    """log2 of the physics ratio: peak x clock fraction of the origin over the target's, the target's clock
    taken at the duration the peak ratio alone predicts."""
    t_o = np.asarray(t_origin_ms, dtype=np.float64)
    po, pt = origin[..., _PEAK], target[..., _PEAK]
    return np.log2(po * clock_fraction(origin, t_o) / (pt * clock_fraction(target, t_o * po / pt)))


def features(b: ArrayLike, m: ArrayLike, n: ArrayLike, k: ArrayLike, t_origin_ms: ArrayLike,
             origin: np.ndarray, target: np.ndarray, dtype: str = "fp32") -> np.ndarray:
    """Input matrix (n, len(FEATURES)), columns in ``FEATURES`` order; ``origin``/``target`` are gpu_vectors
    (one, or one row per GEMM). No shape dims: they let the network memorize pair-specific kernel choices that
    do not carry to an unseen GPU (leave-one-GPU-out 20% with them, 17% without; learned_logo.md)."""
    b, m, n, k, t_o = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (b, m, n, k, t_origin_ms)))
    o = np.broadcast_to(np.asarray(origin, dtype=np.float64), b.shape + (len(GPU_FIELDS),))
    t = np.broadcast_to(np.asarray(target, dtype=np.float64), b.shape + (len(GPU_FIELDS),))
    flops, nbytes = gemm_cost(b, m, n, k, dtype)
    tiles = b * np.ceil(m / TILE) * np.ceil(n / TILE)
    waves_o, waves_t = tiles / o[..., _SMS], tiles / t[..., _SMS]
    sus = np.log2(t[..., _PEAK] * sustained_fraction(t) / (o[..., _PEAK] * sustained_fraction(o)))
    cols = [np.log2(t_o * 1e3), np.log2(t_o / roofline_ms(flops, nbytes, o)), np.log2(flops / nbytes),
            np.log2(waves_t), np.log2(waves_o),
            np.log2(np.maximum(np.ceil(waves_t), 1) / np.maximum(np.ceil(waves_o), 1)),
            np.log2(t[..., _BW] / o[..., _BW]), np.log2(t[..., _PEAK] / o[..., _PEAK]), sus]
    return np.stack(cols, axis=-1)


@dataclass(frozen=True)
class Ensemble:
    """MLPs (SiLU hidden layers, linear output) sharing one input normalization; the correction is their mean."""
    mean: np.ndarray
    std: np.ndarray
    members: tuple[tuple[np.ndarray, ...], ...]  # per member: W0, b0, W1, b1, ...
    meta: str

    def log2_correction(self, x: np.ndarray) -> np.ndarray:
        h0 = (x - self.mean) / self.std
        out = np.zeros(h0.shape[:-1])
        for weights in self.members:
            h = h0
            layers = list(zip(weights[::2], weights[1::2]))
            for w, bias in layers[:-1]:
                z = h @ w + bias
                h = z / (1.0 + np.exp(-z))  # SiLU, as in training
            w, bias = layers[-1]
            out += (h @ w + bias)[..., 0]
        return out / len(self.members)


@functools.lru_cache(maxsize=4)
def load(path: Path = WEIGHTS) -> Ensemble:
    with np.load(path, allow_pickle=False) as z:
        if tuple(str(f) for f in z["features"]) != FEATURES:
            raise ValueError(f"{path}: trained on other features than this code computes; retrain it")
        n_layers, n_members = int(z["n_layers"]), int(z["n_members"])
        members = tuple(tuple(z[f"m{e}_{p}{i}"] for i in range(n_layers) for p in ("w", "b")) for e in range(n_members))
        return Ensemble(z["mean"], z["std"], members, str(z["meta"]))


def predict_target_ms(b: ArrayLike, m: ArrayLike, n: ArrayLike, k: ArrayLike, t_origin_ms: ArrayLike,
                      origin: np.ndarray, target: np.ndarray, dtype: str = "fp32",
                      model: Ensemble | None = None) -> np.ndarray:
    """Predicted time on the target in ms: t_origin x 2^(physics baseline + learned correction), never below
    the target's roofline."""
    model = model or load()
    x = features(b, m, n, k, t_origin_ms, origin, target, dtype)
    bb, mm, nn, kk = np.broadcast_arrays(b, m, n, k)
    flops, nbytes = gemm_cost(bb, mm, nn, kk, dtype)
    t_o = np.broadcast_to(np.asarray(t_origin_ms, dtype=np.float64), flops.shape)
    o = np.broadcast_to(np.asarray(origin, dtype=np.float64), flops.shape + (len(GPU_FIELDS),))
    t = np.broadcast_to(np.asarray(target, dtype=np.float64), flops.shape + (len(GPU_FIELDS),))
    correction = np.clip(model.log2_correction(x), *CORRECTION_LOG2_RANGE)
    pred = t_o * np.exp2(baseline_log2_ratio(t_o, o, t) + correction)
    return np.maximum(pred, roofline_ms(flops, nbytes, t))

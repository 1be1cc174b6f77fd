"""The power limit's boost window in one-call-at-a-time GEMM timings (issue 32, part 3): a power-limited GPU timed one
op at a time runs each call's first ``window_ms`` at a clock its limit does not sustain.

Contract: ``fit(kernel_ms, flops)`` measures a GPU's ``BoostWindow`` from its own GEMM kernel times (latency less the
harness floor) and FLOPs; ``BoostWindow.sustained_ms`` turns such a kernel time into the time the GEMM takes at the
sustained clock (back to back, as in a training step: what the cross-chip law moves), ``isolated_ms`` the reverse.
Used by benchmarks/crossarch/gemm_kernels.py beside the harness floor; never by ``scale``, whose traces run kernels
back to back.

Why. A GPU's power limit holds its clock under sustained load (scale/rates.py, "Power"), but the limiter acts on power
averaged over a window, not on each instant: NVIDIA's boost raises the clock while the board is under its limit and
lowers it when the average exceeds it (NVIDIA GPU Boost, "Tesla GPU Boost" whitepaper; ``nvidia-smi -q -d
PERFORMANCE`` names the "SW Power Cap" throttle reason). A harness that records, calls, records and synchronizes
(NeuSight's collect.py, our timing.py) leaves the GPU idle between calls, so each call starts under the limit and runs
at boost until the window's energy is spent. A kernel of measured time T then did the work of R_b min(T, tau) + R_s
(T - tau)+ at the boost rate R_b and the sustained R_s, so its rate over T is

    R(T) / R_s = 1 + (beta - 1) min(1, tau / T),       beta = R_b / R_s

and its time at the sustained rate is T_s = T + (beta - 1) min(T, tau). On NeuSight's 70 W T4 the p90 FP32 GEMM rate
falls from 1.37x its long-kernel plateau under 0.25 ms to 1.0x beyond 8 ms, as this says; on the A100, V100, P100, P4
and our H100 it rises with T (more waves fill the SMs better) or their shortest kernels run below the plateau, so they
get no boost (beta = 1): the model's curve falls with T, so a curve that does not is none of its. beta and tau are each
GPU's own rate-against-time curve, fitted to nothing else: no prediction or error is read.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Kernel-time bins (ms) of the rate curve, and what enters it: GEMMs of >= MIN_FLOP (a kernel's own work, not the
# harness's noise), bins of >= MIN_KERNELS; the sustained plateau is the p90 rate of kernels of >= PLATEAU_MS (the
# catalog's fp32_gemm_sustained_tflops is the same statistic over GEMMs of >= 20 GFLOP: fit_sustained.py).
BINS_MS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, np.inf)
MIN_FLOP = 1e8
MIN_KERNELS = 20
PLATEAU_MS = 16.0
QUANTILE = 0.9  # the best-run kernels of a bin (the catalog's sustained rates are p90 too): the clock, not the shape
WINDOWS_MS = np.geomspace(0.01, 100.0, 401)  # the search grid of the window (ms) and of the ratio
RATIOS = np.linspace(1.0, 3.0, 401)


@dataclass(frozen=True)
class BoostWindow:
    """beta (``ratio``): the boost rate over the sustained one at the start of a call; tau (``window_ms``): how long
    it lasts. The default (1, 0) is a GPU that holds its clock, or one measured without such a window."""

    ratio: float = 1.0
    window_ms: float = 0.0

    def sustained_ms(self, t_ms: np.ndarray) -> np.ndarray:
        """A one-call kernel time as the time at the sustained clock: T + (beta - 1) min(T, tau) (module doc)."""
        t = np.asarray(t_ms, float)
        return t + (self.ratio - 1.0) * np.minimum(t, self.window_ms)

    def isolated_ms(self, t_ms: np.ndarray) -> np.ndarray:
        """The inverse of sustained_ms: a time at the sustained clock as a one-call kernel time."""
        t = np.asarray(t_ms, float)
        return t - (self.ratio - 1.0) * np.minimum(t / self.ratio, self.window_ms)


def rate_curve(kernel_ms: np.ndarray, flops: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """(the kernel times of each bin with enough kernels, its p90 rate over the plateau's p90, the plateau's kernel
    times); empty where the plateau has too few kernels."""
    t, f = np.asarray(kernel_ms, float), np.asarray(flops, float)
    keep = (t > 0) & (f >= MIN_FLOP)
    t, rate = t[keep], f[keep] / t[keep]
    long = t >= PLATEAU_MS
    if long.sum() < MIN_KERNELS:
        return [], np.empty(0), np.empty(0)
    plateau = np.quantile(rate[long], QUANTILE)
    which = np.digitize(t, BINS_MS[1:-1])
    times, ratios = [], []
    for b in np.unique(which):
        sel = which == b
        if sel.sum() >= MIN_KERNELS:
            times.append(t[sel])
            ratios.append(np.quantile(rate[sel], QUANTILE) / plateau)
    return times, np.array(ratios), t[long]


def fit(kernel_ms: np.ndarray, flops: np.ndarray) -> BoostWindow:
    """Least squares of each bin's rate over the plateau's against the model's, (1 + (beta - 1) x) / (1 + (beta - 1)
    x_p): x the bin's p90 of min(1, tau / T) over its kernels (the model's p90 rate there: the quantile of a
    monotone function), x_p the plateau's (a long window reaches into it), over the grid RATIOS x WINDOWS_MS.
    (1, 0) where the curve has not the model's shape, which falls with T: its shortest kernels run no faster than
    the plateau, or its rate rises with T over the bins (rank correlation >= 0: more waves fill the SMs better), or
    the best fit is beta = 1."""
    times, ratios, long = rate_curve(kernel_ms, flops)
    if len(times) < 3 or ratios[0] <= 1.0 or _rank_correlation(np.arange(len(ratios)), ratios) >= 0:
        return BoostWindow()
    x = np.stack([_window_quantile(t) for t in times], axis=1)  # windows x bins
    x_p = _window_quantile(long)
    excess = (RATIOS - 1.0)[:, None, None]  # ratios x windows x bins
    model = (1 + excess * x[None]) / (1 + excess * x_p[None, :, None])
    residual = np.sum((model - ratios) ** 2, axis=2)
    i, j = np.unravel_index(int(np.argmin(residual)), residual.shape)
    return BoostWindow(float(RATIOS[i]), float(WINDOWS_MS[j])) if RATIOS[i] > 1.0 else BoostWindow()


def _window_quantile(t: np.ndarray) -> np.ndarray:
    """Per window of WINDOWS_MS: the QUANTILE of min(1, tau / T) over the kernel times ``t`` (one quantile per row of
    a windows x kernels block, as np.quantile computes it for each window alone)."""
    return np.quantile(np.minimum(1.0, WINDOWS_MS[:, None] / t[None, :]), QUANTILE, axis=1)


def _rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (no ties in ``a``; ties in ``b`` broken by order)."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])

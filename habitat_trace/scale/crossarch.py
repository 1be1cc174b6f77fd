"""Across GPU chips: every kernel from what each GPU sustains, per pipe, instead of the wave law's peak ratios.

Contract: ``applies(origin, target)`` says when this law replaces the wave law (the GPUs are different chips of one
vendor); ``predict_ns(work, origin_rates, target_rates)`` returns each kernel's target time and the origin's split of
its time into compute, DRAM and latency (``Parts``), from ``Work`` (per-kernel arrays) and each GPU's sustained
``Rates`` (scale/rates.py). Pure numpy; scale/engine.py builds the ``Work`` from the trace and calls it in one hook.

Why (issue 25): the wave law scales a kernel by the ratio of per-SM datasheet peaks, i.e. assumes both GPUs' kernels
reach the same fraction of their peak. Across generations they do not: eager fp16 convolutions reach ~26% of an
H100's tensor peak while a GeForce card, with a sixth of that peak, gets close to its own; kernels that look
memory-bound by their bytes (depthwise convolutions, normalization, small elementwise kernels) run at a fraction of
the H100's DRAM bandwidth, latency- or issue-bound, and scale with SMs x clock, not with DRAM bandwidth. So each
kernel's origin time is split into the three kinds of work it does and each kind is moved at the rate the target
sustains for it (rates.py: sourced sustained GEMM rates per pipe, achievable copy bandwidth, sustained clock):

    c_g = FLOPs / (R_g(pipe) · q_g)         compute at the pipe's sustained rate R (a tensor dtype or the CUDA cores),
                                            q_g the last-wave efficiency of a GEMM's output tiles (Habitat §4.1;
                                            NeuSight, arXiv 2407.13853 §4), 1 elsewhere
    m_g = bytes · (1 − r_g) / B_g           DRAM traffic at the achievable bandwidth B; r_g is the share of the
                                            kernel's working set its L2 holds (below)
    l_g = Z / (S_g · f_g)                   the rest: latency- and issue-bound work, Z SM-cycles, over SMs x clock
    T_g = (c_g^P + m_g^P + l_g^P)^(1/P)     the three overlap (roofline, Williams et al., CACM 2009), softly:
                                            P = 10: nearly the longest alone (a kernel's phases overlap almost
                                            fully), with a smooth corner where two of them are alike

On the origin, ``T_o`` is measured and c_o, m_o known from the op's shapes, so the latency work is what remains:
l_o = (T_o^P − c_o^P − m_o^P)^(1/P). Where the op's cost says more than the measured time (c_o or m_o above T_o:
an L2 that served part of the traffic, or shapes that overstate the kernel), c and m are scaled down together until
they fit, so the origin's measured efficiency carries over. Then l_t = l_o · S_o f_o / (S_t f_t).

GEMM kernels (shapes recorded, output tiles known; issue 32): the sustained rate is the steady state of a GEMM's main
loop, and what a GEMM spends beyond it is work of the same SMs in series with that loop: each tile's prologue (the
first K-slices loaded before the first MMA) and epilogue (the output tile converted and stored), and on the CUDA cores
the loop's own non-FMA instructions, which take issue slots the FMAs need (Lai & Seznec, "Performance upper bound
analysis and optimization of SGEMM on Fermi and Kepler GPUs", CGO 2013: SGEMM's attainable rate is set by its
instruction mix). So that time adds to the compute instead of overlapping it, and beyond one wave it moves with the
compute:
    T_g = ((c_g + l_g)^P + m_g^P)^(1/P),   l_o = (T_o^P − m_o^P)^(1/P) − c_o,
    l_t = l_o / W_o · S_o f_o / (S_t f_t)  +  l_o · (1 − 1 / W_o) · c_t / c_o,      W_o = ceil(tiles / S_o):
one wave's share of it is the fill and drain nothing overlaps (the first tiles' loads, the last tiles' epilogue and
the kernel's ramp: latency, moved at SMs x clock like the rest of the law's latency work), and each further wave is
the same tiles' work again, done by the SMs at the rate their pipe sustains, so that share keeps the fraction of the
sustained rate the GEMM reached on the origin (issue 17's FP32 law; Habitat's premise with sustained rates for peaks).
Per SM-clock the H100 does twice the FP32 math (128 lanes per SM) of a V100, T4, A100 or P100 (64), and a
power-limited card less than S x f says (the T4 sustains 4.2 of its 8.1 TFLOP/s), so moving all of it at SMs x clock
(the first repair) left NeuSight's SGEMMs of >= 0.1 ms 21.1% off on our H100; 17.7% this way (P100 linear rows +31.5%
-> +17%; benchmarks/crossarch/gemm_kernels.py, harness floor out). Moving all of it with the math gives the same
17.6% but made a 6 us single-wave V100 SGEMM (512x512x16) 8.4 us on an A100, whose FP32 rate per SM is lower: a
kernel of one wave is its latency (tests/test_wild.py).
The soft split calls a GEMM that runs at 60-75% of its GPU's sustained rate ~100% latency and moves all of it at S x f.
Where the target does more math per SM-clock than the origin that is far too slow: NeuSight's P100/V100/A100 SGEMMs of
>= 0.1 ms came out 1.4-1.7x too slow on our H100 (twice the FP32 lanes per SM; benchmarks/crossarch/gemm_kernels.py),
and an H100's TF32 GEMMs 1.2x faster on a B200 (twice the tensor rate per SM-clock) where the rates say 2.2x
(docs/accuracy.md "Blackwell"). Convolution kernels keep the soft overlap (chosen on the timm dev split,
where eager convolutions run at a quarter of the H100's peak and are not tile-bound). A fused attention kernel on the
tensor cores (FlashAttention, cuDNN, memory-efficient) is tiled like a GEMM, one block per 128 query rows of one head
(Dao, "FlashAttention-2", 2023, sec. 3.2; cost.attention_tiles), and takes the GEMM rule with those tiles (issue 32,
2026-12-06): the soft overlap had called cuDNN's attention of a Llama 2 70B-wide step at seq 8192, 0.7 of the H100's
BF16 rate, latency, and moved it 0.87x to a B200 (SMs x clock) where its rate is 2.2x; it now moves 0.46x. To the
mma.sync GPUs (GeForce, A100, V100) it keeps the soft overlap by the rule below, so the timm dev split does not move.
A split-K GEMM (more CTAs than output tiles: CUTLASS and cuBLAS's sm80 kernels put the K slices in gridDim.z) has that
many times its tiles of work to spread over the SMs (``split_k``), or its last-wave efficiency is its output tiles'
alone: a 256 x 256 x 200,000 weight gradient, 16 tiles of 64 on 132 SMs, 0.12, where CUTLASS ran it as 66 K slices.
Which GPU runs that work in series is a property of its pipe (rates.serial_pipes: CUDA cores with 32 FP32 lanes per
single-dispatch scheduler, Hopper/Blackwell tensor cores). On a GPU whose pipe is serial, the time beyond the rate is
that in-series work, and on a target whose pipe is not, it overlaps the math there: such a GEMM (serial origin pipe,
non-serial target pipe: an H100's GEMMs on a V100, T4, A100 or GeForce tensor cores) keeps the soft overlap. Every
other GEMM adds: on a non-serial origin the time beyond the rate is not issue or pipeline work (the GPU overlaps
those) but what keeps the GEMM under its rate everywhere (tiles, occupancy, short K), in series on any target.
Adding it from an H100 to those GPUs had cost NeuSight's FP32 dev cells 9.3% -> 10.6% and timm's RTX 3090 8.1% ->
8.5% (predicted slower), and moved with the math as well (issue 32, part 3) the mean over those seven GPUs 9.1% ->
13.7% (T4 26.9%, RTX 3090 16.9%); the split keeps the GEMM kernels' and Blackwell's gain without that cost (the
choice, with one GPU and one model family left out: benchmarks/results/gemm_rule_choice.md).

Kernel choice (issue 32, part 3; CUDA-core GEMMs whose time beyond the rate adds). Beyond its first wave a GEMM reaches
a fraction e = c / (c + l (1 - 1/W)) of its GPU's sustained rate, and that fraction is partly the shape's (waves, K,
tile fill: the same on any GPU) and partly the kernel the origin's library picked for it, which the target's library
does not run: cuBLAS picks per GPU (NeuSight's P4 and P100 run their linear shapes with K-major `maxwell_sgemm_*_tn`
kernels that fall to 0.25-0.4 of their rate as the weight grows, while their `_nn` bmm kernels hold it and the V100's
`volta_sgemm_*_tn` hold 0.9; our H100 runs bmm shapes with 32 outputs per thread at 0.58). Over NeuSight's five GPUs the
correlation of log e between two GPUs on the same shapes is 0.92 for strided-batched GEMMs and 0.51 for single ones, so
carrying e whole (the law before) carries the origin's kernel choice too. The target's fraction is the least-squares
prediction from the origin's instead, in log space (regression toward the mean): e_t = E (e_o / E)^A, E the median
fraction and A the mean slope of log e on one GPU against another (every ordered pair of the five), per kind (single: E
0.907, A 0.667; batched: 0.575, 0.934; TYPICAL_EFFICIENCY, EFFICIENCY_SLOPE), on kernel times at the sustained clock
(the T4's one-call times less its boost window, benchmarks/crossarch/boost_window.py). The median, not the geometric
mean: log e has a long left tail (skew -2.2 / -1.8, short-K shapes) that puts the mean of logs at the 30th / 35th
percentile. A GEMM measured above its GPU's sustained rate (e > 1, the rate being the p90 of large GEMMs) ran above the
clock its power limit sustains (a call started on an idle GPU: the T4 runs its first 0.7 ms at 1.35x its sustained rate,
benchmarks/crossarch/boost_window.py), so the target's compute stays at its own rate rather than the origin's fit, but
only as far as the origin's clock can rise: sustained over peak clock (``Rates.clock_headroom``: the T4's 900 of 1590
MHz, 1 on a GPU that holds its boost). What the fit says beyond that is the op's cost overstating the kernel (split K,
an L2 that served the operands), which the target shares (issue 32, 2026-12-06: an H100's split-K weight gradient had
come out 7.9x slower on a B200; NeuSight's shapes of >= 0.1 ms to our H100 14.7% -> 14.8%, between the five 16.7% ->
16.5%). NeuSight's (B, M, N, K) name its reduction N (docs/learned.md, "NeuSight's dimension order"): read so, with
our H100 re-timed that way on 2026-12-06, E and A are re-measured (above) and the H100 set's kernels >= 0.1 ms are 13.4%.
Neither applies on one chip (``same_kernels``: the same library runs the same kernels) nor to tensor-core GEMMs (no
cross-chip per-kernel data here to measure them on). On NeuSight's shapes of >= 0.1 ms on our H100: 17.7% -> 15.1%
median (with each GPU left out of E and A, each GPU's rows within 0.4 points of that); between the five 18.4% -> 17.7%
(benchmarks/crossarch/gemm_efficiency.py --loo, gemm_kernels.py); with the T4's boost window taken out of its one-call
timings, 14.8% and 16.6%.

Default shares. A kernel whose op's bytes are unknown (a kernel without its op, a foreach optimizer whose TensorList
shapes Kineto left out, as it does for long lists) takes its class's shares of its time as its parts: DRAM 0.8 for
streaming kernels, 0.2 and compute 0.5 for library ones, the P-norm's remainder as latency. So such a kernel moves
with SMs x clock toward a GPU with more bandwidth and with its DRAM share toward one with less. Scaling the shares
until their overlap is the whole time (DRAM-bound where the class says streaming) was tried on 2026-12-06 and dropped:
a CUDA-graph LLaMA step, whose kernels have no ops, then came out 9.1x an H100 on a V100 and 34.9x on a T4 against
4.6x and 12.2x for an eager LLaMA step with its shapes (5.5x and 20.4x with the shares as parts). And streaming
kernels below their bandwidth do not take a faster GPU's bandwidth: from an H100 to an H200 (the same chip, 1.43x the
bandwidth) those at 0.3-0.85 of the H100's run ~1.1x faster, those at it ~1.2-1.3x
(benchmarks/results/streaming_h100_h200.md). A foreach op's own TensorList shapes, where recorded, give its bytes
(cost.in_place_write_bytes: its self tensors written back, which had made them unknown), at the element size its
kernel's name gives (cost.foreach_byte_scale).

L2 (the issue's "L2 decides what reaches DRAM"): a kernel whose working set (its op's bytes) fits in a GPU's L2 is
served from there: r_g = 1 / (1 + (bytes / (L2_SHARE · L2_g))^4), a smooth step at half the L2 (on A100 and H100
the L2 is two partitions that each hold the lines their SMs read, NVIDIA A100 whitepaper, "L2 cache"). Bytes the
target's L2 holds that the origin's did not move at L2 bandwidth instead (L2_BYTES_PER_CLOCK_PER_SM x SMs x clock,
never slower than the DRAM they no longer need); bytes the origin's L2 held and the target's does not, at the
target's DRAM bandwidth. Both are the kernel's memory time (L2 time added to the DRAM time left), so a bigger L2
never makes a kernel slower (in the latency part, P-normed, it could by a hair: issue 32's hypothesis draw).

P, L2_SHARE and the default shares for kernels whose op recorded no shapes are the law's only constants; none is
fitted per GPU. P was chosen on the timm dev split and NeuSight's dev GPUs (docs/method.md "Across chips").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.scale import wave
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.rates import Rates

DRAM_KEY = "dram_efficiency"
# Smoothness of the overlap of compute, DRAM and latency time (1: they add; infinity: the longest alone counts).
# Chosen on the timm dev split (benchmarks/crossarch/timm_published.py --sweep, H100 and H200 origins, four GPUs): with
# any one GPU or model family left out, the rest choose P = 10 of 2/3/4/6/10 every time, and the GPU left out scores
# 4.9-8.5% there (4.6-9.0% at P = 6: the choice moves the error by < 1%). NeuSight's FP32 dev GPUs agree (9.3%).
P = 10.0
# Output tile of a GEMM for the last-wave efficiency: cuBLAS SGEMM kernels tile C in 32..128-wide tiles (the square
# root of the tile area in NeuSight's five GPUs' kernel names: median 90, quartiles 64-128; our H100's SGEMMs on its
# shapes 64), so 64; tensor-core kernels use 128x128 and larger tiles (cuBLAS nvjet 128x256/192x192, CUTLASS sm80
# 128x128/256x128 in the shared traces' kernel names): 128. (Scored on NeuSight's per-kernel data, 64 had fit best with
# the shapes read in the wrong order, 0.435 mean |log error| over GEMMs >= 1 GFLOP against 0.437 at 32; read in
# NeuSight's order, 2026-12-06, 32 scores lower with today's law, 0.233 against 0.244: kept at the libraries' tile.)
SIMT_TILE, TENSOR_TILE = 64.0, 128.0
L2_SHARE = 0.5
L2_STEEPNESS = 4.0
# L2 -> SM bandwidth: 5120 B/clk on the A100's 108 SMs (NVIDIA A100 whitepaper, "L2 cache": 2.3x V100's 2048 B/clk
# on 80 SMs), ~47 B per clock per SM.
L2_BYTES_PER_CLOCK_PER_SM = 47.0
# Kernels whose op recorded no shapes (record_shapes=False, TensorList arguments): the share of the origin time taken
# as DRAM traffic (engine's class defaults: 0.8 streaming, 0.2 library) and, for library kernels, as compute at the
# pipe's sustained rate. Assumptions, stated as such in the kernel's reason.
COMPUTE_SHARE_WITHOUT_SHAPES = 0.5
# What a CUDA-core GEMM's fraction of its sustained rate beyond its first wave carries to another chip (module doc,
# "Kernel choice"): e_t = E (e_o / E)^A, per kind of GEMM (single, strided-batched). E is the median of that
# fraction over NeuSight's five GPUs' SGEMMs of >= 2 waves and >= 0.1 ms of kernel time, A the mean least-squares slope
# of log e on one GPU against another over the same shapes (every ordered pair), i.e. the share of an origin's
# deviation from E that is the shape's, not its library's kernel choice. Measured, not fitted to any error:
# benchmarks/crossarch/gemm_efficiency.py prints them (and with each GPU left out).
TYPICAL_EFFICIENCY = {False: 0.907, True: 0.575}  # single, batched
EFFICIENCY_SLOPE = {False: 0.667, True: 0.934}


@dataclass(frozen=True)
class Work:
    """Per GPU event (arrays of one length): what the law needs to know of each kernel."""

    t_origin: np.ndarray  # ns, measured
    flops: np.ndarray  # FLOPs on its pipe: NaN unknown, 0 for streaming kernels (their arithmetic is not the limit)
    nbytes: np.ndarray  # bytes its op's shapes say it moves (its share of them); NaN unknown
    pipe: np.ndarray  # the origin's pipe: a tensor dtype, or "fp32" (CUDA cores)
    pipe_target: np.ndarray  # the pipe it runs on on the target (precision substituted where the target lacks it)
    width: np.ndarray  # operand size on the target over the origin's (2 for FP8 run in BF16), 1 elsewhere
    tiles: np.ndarray  # output tiles of a GEMM kernel (NaN: not a GEMM with recorded shapes)
    memory_default: np.ndarray  # share of t_origin taken as DRAM time where nbytes is NaN
    compute_default: np.ndarray  # share of t_origin taken as compute time where flops is NaN
    batched: np.ndarray | None = None  # a strided-batched GEMM (B > 1: bmm, baddbmm); None: none is


@dataclass(frozen=True)
class Parts:
    """The origin's time split by the law (ns per kernel): compute, DRAM, latency, and where latency adds to compute
    (GEMMs with recorded shapes, module doc) instead of overlapping it."""

    compute: np.ndarray
    dram: np.ndarray
    latency: np.ndarray
    additive: np.ndarray

    def total(self) -> np.ndarray:
        """The time the three parts make (the origin's measured time, for the origin's split)."""
        return combine(self.compute, self.dram, self.latency, self.additive)


def combine(c: np.ndarray, m: np.ndarray, lat: np.ndarray, additive: np.ndarray) -> np.ndarray:
    """T = (c^P + m^P + l^P)^(1/P), or ((c + l)^P + m^P)^(1/P) where ``additive`` (module doc)."""
    return np.where(additive, _norm(c + lat, m), _norm(c, m, lat))


def applies(origin: GpuSpec, target: GpuSpec) -> bool:
    """Between two chips of one vendor (H100 -> RTX 4090, A100 -> L4, V100 -> T4). Within one chip (H100 <-> H200,
    what-if SM counts, an H100 SXM <-> PCIe) the libraries run the same kernels, which the wave law scales to a few %
    (README "How accurate"); across vendors scale/vendor.py decides; between two AMD chips the wave law with CDNA
    occupancy stays (no sustained figures are catalogued for them)."""
    if origin.vendor != target.vendor or origin.vendor != "nvidia":  # AMD -> AMD keeps the wave law (CDNA occupancy)
        return False
    chip_o, chip_t = origin.extra.get("chip"), target.extra.get("chip")
    if chip_o and chip_t:
        return chip_o != chip_t
    return (origin.architecture, origin.compute_capability) != (target.architecture, target.compute_capability)


def predict_ns(work: Work, ro: Rates, rt: Rates, same_kernels: bool = False) -> tuple[np.ndarray, Parts]:
    """Target time (ns) of every kernel of ``work`` and the origin's split of its time, from the origin's and the
    target's sustained rates (``rates.rates(spec)``). ``same_kernels``: the target's libraries run the origin's kernels
    (one chip), so a CUDA-core GEMM's efficiency carries whole (module doc, "Kernel choice")."""
    t_o = np.maximum(np.asarray(work.t_origin, float), 1.0)
    c_o, c_t = _compute_ns(work, ro, rt, t_o)
    nbytes = np.asarray(work.nbytes, float)
    known = np.isfinite(nbytes)
    res_o, res_t = l2_resident(nbytes, ro), l2_resident(nbytes, rt)
    m_o = np.where(known, nbytes * (1 - res_o) / ro.dram_gbs, work.memory_default * t_o)
    m_t = np.where(known, nbytes * (1 - res_t) * work.width / rt.dram_gbs, m_o * ro.dram_gbs / rt.dram_gbs * work.width)
    # the op's cost says more than was measured: shrink compute and DRAM time together until they fit
    fit = np.minimum(1.0, t_o / np.maximum(_norm(c_o, m_o), 1e-9))
    additive = gemm_with_shapes(work) & (in_series(rt, work.pipe_target) | ~in_series(ro, work.pipe))
    # the target's library picks its own kernel for a CUDA-core GEMM (module doc, "Kernel choice"); one measured above
    # its GPU's sustained rate ran above the sustained clock, which the target's compute does not inherit, but only as
    # far as the origin's clock can rise above its sustained one: the rest is the op's cost overstating the kernel
    # (K split over more CTAs than output tiles, an L2 that served the operands), which the target shares
    chosen = additive & simt_gemm(work) & (not same_kernels)
    inherited = np.where(chosen, np.minimum(1.0, fit / ro.clock_headroom), fit)
    c_o, m_o, c_t, m_t = c_o * fit, m_o * fit, c_t * inherited, m_t * fit
    soft = np.maximum(t_o ** P - c_o ** P - m_o ** P, 0.0) ** (1 / P)
    l_o = np.where(additive, np.maximum(np.maximum(t_o ** P - m_o ** P, 0.0) ** (1 / P) - c_o, 0.0), soft)
    # latency work moves with SMs x clock; a GEMM's time beyond its rate is one wave's fill and drain (latency) and,
    # for every further wave, its tiles' own work, which moves with its math (module doc)
    sm_clock = ro.sm_ghz_on(work.pipe) / rt.sm_ghz_on(work.pipe_target)
    first_wave = 1.0 / gemm_waves(work.tiles, ro.sms)
    further = l_o * (1 - first_wave)
    e_o = c_o / np.maximum(c_o + further, 1e-9)
    e_t = np.where(chosen, carried_efficiency(e_o, work.batched), e_o)
    further_t = np.where(chosen, c_t * (1 / np.maximum(e_t, 1e-9) - 1), further * c_t / np.maximum(c_o, 1e-9))
    l_t = np.where(additive, l_o * first_wave * sm_clock + further_t, l_o * sm_clock)
    # bytes the target's L2 holds and the origin's did not: L2 time instead of DRAM time, never more than that
    l2_bw = L2_BYTES_PER_CLOCK_PER_SM * rt.sm_ghz_on(work.pipe_target)  # GB/s
    gained = np.where(known, np.maximum(res_t - res_o, 0.0) * nbytes * work.width * fit, 0.0)
    # in the memory part, beside the DRAM time those bytes no longer take: never more memory time than before
    m_t = m_t + np.minimum(gained / l2_bw, gained / rt.dram_gbs)
    return combine(c_t, m_t, l_t, additive), Parts(c_o, m_o, l_o, additive)


def gemm_with_shapes(work: Work) -> np.ndarray:
    """GEMM kernels whose op recorded its shapes (output tiles known, FLOPs > 0): their latency adds, unless the
    origin's pipe is serial and the target's is not (module doc)."""
    flops = np.nan_to_num(np.asarray(work.flops, float))
    return np.isfinite(np.asarray(work.tiles, float)) & (flops > 0)


def simt_gemm(work: Work) -> np.ndarray:
    """CUDA-core GEMM kernels with recorded shapes on both GPUs: those whose kernel choice the law models."""
    pipes = np.asarray(work.pipe, dtype=object), np.asarray(work.pipe_target, dtype=object)
    return gemm_with_shapes(work) & (pipes[0] == "fp32") & (pipes[1] == "fp32")


def carried_efficiency(e_o: np.ndarray, batched: np.ndarray | None) -> np.ndarray:
    """The fraction of its sustained rate a CUDA-core GEMM reaches beyond its first wave on another chip, from the
    origin's ``e_o``: E (e_o / E)^A per kind (TYPICAL_EFFICIENCY, EFFICIENCY_SLOPE; module doc)."""
    kind = np.zeros(len(e_o), bool) if batched is None else np.asarray(batched, bool)
    typical = np.where(kind, TYPICAL_EFFICIENCY[True], TYPICAL_EFFICIENCY[False])
    slope = np.where(kind, EFFICIENCY_SLOPE[True], EFFICIENCY_SLOPE[False])
    return typical * (np.maximum(e_o, 1e-9) / typical) ** slope


def in_series(r: Rates, pipes: np.ndarray) -> np.ndarray:
    """Per kernel: does the GPU of ``r`` run a GEMM's work beyond its math in series on that pipe (rates.serial_pipes)."""
    return np.isin(np.asarray(pipes, dtype=object), list(r.serial_pipes))


def l2_resident(nbytes: np.ndarray, r: Rates) -> np.ndarray:
    """Share of a kernel's working set (``nbytes``) the GPU's L2 serves: ~1 well below L2_SHARE of the L2, ~0 above."""
    x = np.nan_to_num(np.asarray(nbytes, float), nan=np.inf) / max(L2_SHARE * r.l2_bytes, 1.0)
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + x ** L2_STEEPNESS)


def gemm_waves(tiles: np.ndarray, sms: float) -> np.ndarray:
    """Waves of a GEMM of ``tiles`` output tiles on ``sms`` SMs, ceil(tiles / SMs) (Habitat §4.1), at least 1; 1 where
    the tiles are unknown."""
    w = np.asarray(tiles, float) / sms
    return np.where(np.isfinite(w) & (w > 0), np.maximum(np.ceil(w - 1e-9), 1.0), 1.0)


def split_k(b: np.ndarray, grid_z: np.ndarray) -> np.ndarray:
    """How many ways a GEMM kernel's launch splits K: its grid's z extent over the batch count B where that is a
    whole multiple above 1 (CUTLASS and cuBLAS's sm80 kernels put split-K slices in gridDim.z, and batches there too:
    a 256 x 256 x 200,000 weight gradient runs as 2 tiles x 66 K-slices, grid [2, 1, 66], to fill an H100's 132
    SMs), else 1. A split GEMM has that many times its output tiles of work to spread over the SMs, so its last-wave
    efficiency is the split's, not its output tiles' (16 of 64: 0.12 of an H100)."""
    b, z = np.asarray(b, float), np.nan_to_num(np.asarray(grid_z, float), nan=0.0)
    ratio = z / np.maximum(b, 1.0)
    return np.where((ratio > 1) & (np.abs(ratio - np.round(ratio)) < 1e-9), np.round(ratio), 1.0)


def wave_efficiency(tiles: np.ndarray, sms: float) -> np.ndarray:
    """Share of the SM-time of the last wave a GEMM of ``tiles`` output tiles uses: W / ceil(W), 1 at many waves or
    where the tiles are unknown."""
    w = np.asarray(tiles, float) / sms
    return np.where(np.isfinite(w) & (w > 0), w / np.maximum(np.ceil(w - 1e-9), 1.0), 1.0)


def gemm_tiles(b: np.ndarray, m: np.ndarray, n: np.ndarray, tensor: np.ndarray) -> np.ndarray:
    """Output tiles of a batched GEMM: B x ceil(M/T) x ceil(N/T), T the pipe's tile (SIMT_TILE or TENSOR_TILE)."""
    tile = np.where(tensor, TENSOR_TILE, SIMT_TILE)
    return np.asarray(b, float) * np.ceil(np.asarray(m, float) / tile) * np.ceil(np.asarray(n, float) / tile)


def dram_efficiency(spec: GpuSpec) -> float:
    """Achievable fraction of the datasheet DRAM bandwidth for streaming kernels: the catalog's ``dram_efficiency``
    (GDDR cards and the P100 reach 0.70-0.74, HBM2 V100 0.85, H100/H200 0.88-0.90), else wave.py's measured
    Hopper constant. Read by the wave law's memory side across architectures and by scale/vendor.py."""
    v = spec.extra.get(DRAM_KEY)
    return float(v) if isinstance(v, (int, float)) and 0 < v <= 1 else wave.ACHIEVABLE_BANDWIDTH_FRACTION


def dram_efficiencies(origin: GpuSpec, target: GpuSpec) -> tuple[float, float]:
    """(origin, target) DRAM efficiency for the engine's memory side: per GPU across architectures, wave.py's one
    constant within an architecture (the validated same-architecture path stays as it was)."""
    if origin.architecture == target.architecture:
        return wave.ACHIEVABLE_BANDWIDTH_FRACTION, wave.ACHIEVABLE_BANDWIDTH_FRACTION
    return dram_efficiency(origin), dram_efficiency(target)


def _compute_ns(work: Work, ro: Rates, rt: Rates, t_o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compute time on either GPU: FLOPs at the pipe's sustained rate and last-wave efficiency (ns)."""
    r_o = _pipe_rates(ro, work.pipe) * 1e3  # FLOP/ns
    r_t = _pipe_rates(rt, work.pipe_target) * 1e3
    flops = np.asarray(work.flops, float)
    c_o = flops / (r_o * wave_efficiency(work.tiles, ro.sms))
    c_t = flops / (r_t * wave_efficiency(work.tiles, rt.sms))
    unknown = ~np.isfinite(flops)
    c_o = np.where(unknown, work.compute_default * t_o, c_o)
    c_t = np.where(unknown, c_o * r_o / r_t, c_t)
    return c_o, c_t


def _pipe_rates(r: Rates, pipes: Any) -> np.ndarray:
    """``[r.pipe_tflops(p) for p in pipes]`` as float64, looked up once per distinct pipe (a few over every kernel)."""
    codes, uniq = pd.factorize(np.asarray(pipes, dtype=object), use_na_sentinel=False)
    return np.array([r.pipe_tflops(p) for p in uniq], dtype=float)[codes]


def _norm(*xs: np.ndarray) -> np.ndarray:
    return np.sum([np.asarray(x, float) ** P for x in xs], axis=0) ** (1 / P)

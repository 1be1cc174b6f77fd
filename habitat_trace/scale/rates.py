"""What a GPU sustains: the per-pipe rates, bandwidth and clock the cross-architecture law (scale/crossarch.py) reads.

Contract: ``rates(spec) -> Rates``, pure. Each figure is the catalog's sourced sustained value (specs/gpus.toml,
issue 25: public torch matmul and copy benchmarks, datasheets, our measurements) where it has one, else a fallback
rule below, and ``Rates.fallbacks`` names every figure a rule supplied, so a prediction can say what it rests on.

Why sustained rates and not datasheet peaks: large GEMMs reach 0.43 (A10, 150 W) to 1.13 (RTX 5090, boosting past
its rated clock) of the datasheet tensor peak, streaming copies 0.70-0.90 of the datasheet bandwidth. A law that
takes peak ratios assumes every GPU reaches the same fraction of its peak; across generations they do not.

Power (issue 32). A card that cannot hold its boost clock under load is slowed by its power limit, not by its
datasheet: dynamic power is C V^2 f and V rises with f (Mudge, "Power: a first-class architectural design
constraint", IEEE Computer 34(4), 2001), so a fixed power budget sets the clock. The heaviest load a GPU sees in
training is a large GEMM on its tensor cores, and the catalog's measured matmul rate is that load at the stock power
limit: its fraction of the datasheet peak, phi, says how far the limit holds the clock down. Two rules read it:
- a tensor dtype without its own measurement runs at phi x its peak (the same tensor cores at the same power limit:
  an A10's TF32 at 0.43 of its peak like its FP16, not at the catalog median 0.77);
- without a sourced sustained clock, the SM clock under load is boost x min(1, phi / phi_typical), phi_typical the
  catalog median of the same class (TENSOR_SUSTAINED_FRACTION; GeForce cards their own): a GPU that reaches the
  typical fraction is taken to hold its boost clock, one below it to run that much slower, but never below its base
  clock: "every application and game runs at a guaranteed, minimum Base Clock speed" (NVIDIA, GPU Boost technology
  page, nvidia.com/en-gb/geforce/technologies/gpu-boost/technology). A measured matmul far below the typical fraction
  is then the library's shortfall on that chip as much as the clock's (the Quadro RTX 8000 as the TITAN RTX: 0.41 of
  its peak, 949 MHz by the ratio, 1395 MHz its base). Latency- and issue-bound work moves with it (crossarch.py).
- a card with a catalogued SGEMM and no tensor matmul (the RTX 6000 Ada, P100, P4) takes phi from its SGEMM:
  phi_typical x min(1, s / s_typical), s the SGEMM's fraction of the FP32 peak and s_typical the median of the cards
  with the same FP32 issue (``power_fraction``; serial_pipes below says why the classes differ). Left out of its
  class's median, the clock this gives each of the 36 catalog cards that have both figures is 5.9% from the clock its
  tensor fraction gives (worst 21%), where its boost clock is 9.9% (tests/test_crossarch.py). A card with neither
  but a sourced clock under load below boost (the L40's, from its binding sibling: specs/gpus.toml) takes that share
  of the typical fraction.
- tensor-core work never above the clock its datasheet tensor peaks are quoted at (``tensor_clock_mhz_implied``,
  ``Rates.tensor_clock_mhz``: Hopper and data-center Blackwell, whose FP32 peak is quoted at the boost clock and whose
  tensor peaks at a lower one, e.g. the H100 SXM's 989.4 TFLOP/s = 132 SMs x 4,096 FLOP x 1.83 GHz against 1.98 GHz):
  NVIDIA rates those boards' tensor math at the clock their power limit holds under it (our H100, 2026-12-06: steps
  made mostly of large GEMMs, ViT-B inference and MLPerf-width LLM training, at 1480-1780 MHz under its 700 W cap;
  training steps with memory-bound work between their GEMMs at 1950-1980; benchmarks/results/
  clock_under_load_h100.csv). CUDA-core work keeps the clock the FP32 peak is quoted at (``Rates.sm_ghz_on``: per
  kernel, by its pipe).
A what-if entry that lowers a GPU's power limit (``base`` + a smaller ``tdp_w``, scale/specs.py) lowers its clock by
(P_new / P_base)^(1/3), the same law, so a lower limit is never faster (tests/test_crossarch.py, from any origin and
through every method: a what-if's FP32 GEMMs that the learned model predicts on its base go there first, then to the
what-if by the same-chip law, scale/engine.py ``_via_base``).

GEMM work in series (issue 32; ``Rates.serial_pipes``, read by crossarch.py): the pipes on which what a GEMM does
beyond its math cannot overlap the math on this GPU.
- CUDA cores: where one scheduler dispatches one instruction per clock to 32 FP32 lanes (GA10x, Ada, Hopper,
  Blackwell: 128 lanes per SM in four partitions, NVIDIA GA102 and H100 whitepapers), an FFMA issues every clock to
  keep the lanes busy and every other instruction of the loop takes an FFMA's slot (Lai & Seznec, CGO 2013). With 16
  lanes per scheduler (Volta, Turing, GA100: an FFMA "is performed over two cycles, and the schedulers can issue
  independent instructions every cycle", NVIDIA Volta tuning guide 4.1.1) or two dispatch units per scheduler
  (Pascal, GP100 whitepaper) the other instructions issue between the FFMAs.
- Tensor cores: Hopper's wgmma and Blackwell's tcgen05 (compute capability 9.x and 10.x: 4,096-8,192 dense FLOP per
  SM-clock, twice to eight times the mma.sync GPUs') run the main loop as an asynchronous TMA/MMA pipeline; a tile's
  pipeline fill and epilogue are outside it, in series. On mma.sync GPUs (Volta to Ada, GeForce Blackwell) the warps
  that issue the MMAs issue that work between them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from habitat_trace.scale.gpu import GpuSpec

TENSOR_DTYPES = ("fp16", "bf16", "tf32", "fp8")
# Fallbacks: the median sustained / datasheet ratio over the NVIDIA catalog GPUs with a sourced figure (2026-12-06;
# tests/test_rates.py recomputes each from the catalog, so a catalog change that moves a median fails it). GeForce
# cards hold clocks above their rated boost (sourced tensor ratios 0.95-1.17 over the RTX 2070 to 5090), so they
# get their own tensor median; every other card (data-center, workstation) the other one.
TENSOR_SUSTAINED_FRACTION = 0.77  # fp16/bf16/tf32/fp8, non-GeForce: median 0.768 over 73 sourced (GPU, dtype) pairs
GEFORCE_TENSOR_SUSTAINED_FRACTION = 1.07  # median 1.069 over the 19 sourced GeForce (GPU, dtype) pairs
FP32_GEMM_SUSTAINED_FRACTION = 0.72  # CUDA-core SGEMM: median 0.718 over 38 sourced GPUs
# The same median per class of FP32 issue (serial_pipes: one scheduler feeding 32 lanes issues every other instruction
# of the loop in an FFMA's slot, so these cards' SGEMMs reach less of their peak at any clock): what a card's measured
# SGEMM is compared with where no tensor matmul of it is catalogued (module doc, "Power").
SERIAL_FP32_GEMM_FRACTION = 0.66  # GA10x, Ada, Hopper, Blackwell: median 0.657 over 24 sourced GPUs
PAIRED_FP32_GEMM_FRACTION = 0.87  # Pascal, Volta, Turing, GA100: median 0.874 over 14 sourced GPUs
DRAM_EFFICIENCY = 0.83  # achievable copy bandwidth / datasheet: median 0.833 over 20 sourced GPUs (each run once)


@dataclass(frozen=True)
class Rates:
    """Sustained figures of one GPU (TFLOP/s, GB/s, MHz) and the names of those a fallback rule supplied."""

    tensor_tflops: Mapping[str, float]  # per tensor dtype the GPU has (dense, the accumulate torch uses)
    simt_tflops: float  # CUDA-core FP32 GEMM
    dram_gbs: float  # achievable DRAM bandwidth of a streaming kernel
    clock_mhz: float  # SM clock under sustained load
    sms: int
    l2_bytes: float
    fallbacks: tuple[str, ...] = ()
    serial_pipes: frozenset[str] = frozenset()  # pipes whose GEMM work beyond the math runs in series (module doc)
    tensor_clock_mhz: float | None = None  # SM clock under tensor-core load where lower than clock_mhz (module doc)
    peak_clock_mhz: float | None = None  # the fastest a kernel can run: boost, or the sustained clock where above it

    @property
    def clock_headroom(self) -> float:
        """Sustained over peak clock (<= 1): how far above its sustained rate a kernel can run on this GPU because a
        call started at a clock the power limit does not hold (the T4's 900 of 1590 MHz: 0.57), 1 where the GPU holds
        its boost."""
        return min(1.0, self.clock_mhz / self.peak_clock_mhz) if self.peak_clock_mhz else 1.0

    def pipe_tflops(self, pipe: str) -> float:
        """The sustained rate of a pipe: a tensor dtype, else the CUDA cores ("fp32", and AMD's "matrix-fp32")."""
        return self.tensor_tflops.get(pipe, self.simt_tflops)

    @property
    def sm_ghz(self) -> float:
        """SMs x sustained clock (GHz): what latency- and issue-bound work scales with."""
        return self.sms * self.clock_mhz * 1e-3

    def sm_ghz_on(self, pipes: np.ndarray) -> np.ndarray:
        """Per kernel, SMs x the clock its pipe runs at: the tensor clock for tensor dtypes, else the SM clock."""
        tensor = np.isin(np.asarray(pipes, dtype=object), TENSOR_DTYPES)
        return np.where(tensor, self.sms * (self.tensor_clock_mhz or self.clock_mhz) * 1e-3, self.sm_ghz)


def is_geforce(spec: GpuSpec) -> bool:
    return "consumer" in str(spec.extra.get("form_factor", "")) or str(spec.extra.get("full_name", "")).startswith(
        "GeForce")


def rates(spec: GpuSpec) -> Rates:
    """The catalog's sustained figures of ``spec``, each missing one from the fallback rules above."""
    e, missing = spec.extra, []
    tensor = {}
    phi = power_fraction(spec)
    for dtype in TENSOR_DTYPES:
        if dtype not in spec.tensor_tflops:
            continue
        value = _number(e.get(f"tensor_sustained_tflops_{dtype}"))
        if value is None:
            value = _sibling_dtype(spec, dtype)
        if value is None:
            missing.append(f"tensor_sustained_tflops_{dtype}")
            value = (phi if phi is not None else typical_tensor_fraction(spec)) * spec.tensor_tflops[dtype]
        tensor[dtype] = value
    if "fp32" in spec.tensor_tflops:  # AMD's FP32 matrix cores ("matrix-fp32"): no sustained figure is catalogued
        tensor["matrix-fp32"] = TENSOR_SUSTAINED_FRACTION * spec.tensor_tflops["fp32"]
    simt = _number(e.get("fp32_gemm_sustained_tflops"))
    if simt is None:
        missing.append("fp32_gemm_sustained_tflops")
        simt = FP32_GEMM_SUSTAINED_FRACTION * spec.fp32_tflops
    clock = _clock_mhz(spec, phi, missing)
    return Rates(tensor, simt, _dram_gbs(spec, missing), clock, spec.sms, spec.l2_cache_mib * 2**20, tuple(missing),
                 serial_pipes(spec), _tensor_clock_mhz(spec, clock), max(clock, spec.boost_clock_mhz))


def serial_pipes(spec: GpuSpec) -> frozenset[str]:
    """The pipes on which a GEMM's work beyond its math runs in series with it (module doc): "fp32" where 32 FP32
    lanes share one single-dispatch scheduler (compute capability >= 7.0, 128 lanes per SM), the tensor dtypes on
    Hopper and data-center Blackwell (compute capability 9.x, 10.x)."""
    if spec.vendor != "nvidia":
        return frozenset()
    major = int(str(spec.compute_capability).split(".")[0])
    # lanes per SM: the catalog's, else what the FP32 peak says (fp32_tflops = sms x lanes x 2 x boost clock)
    lanes = _number(spec.extra.get("fp32_lanes_per_sm")) or spec.fp32_tflops * 1e6 / (
        2 * spec.sms * spec.boost_clock_mhz)
    out = {"fp32"} if major >= 7 and round(lanes) >= 128 else set()
    if major in (9, 10):
        out |= set(TENSOR_DTYPES)
    return frozenset(out)


def typical_tensor_fraction(spec: GpuSpec) -> float:
    """The catalog median of sustained / datasheet tensor rate for the GPU's class (GeForce cards boost past theirs)."""
    return GEFORCE_TENSOR_SUSTAINED_FRACTION if is_geforce(spec) else TENSOR_SUSTAINED_FRACTION


def tensor_fraction(spec: GpuSpec) -> float | None:
    """phi: the best measured sustained / datasheet rate over the GPU's tensor dtypes (the tensor cores at the stock
    power limit; the best, since a lower one of another dtype is the library's, not the power limit's), None when
    none is catalogued."""
    found = [v / spec.tensor_tflops[d] for d in TENSOR_DTYPES if d in spec.tensor_tflops
             and (v := _number(spec.extra.get(f"tensor_sustained_tflops_{d}"))) is not None]
    return max(found) if found else None


def power_fraction(spec: GpuSpec) -> float | None:
    """phi as the power-limit rules read it (module doc, "Power"): the measured tensor fraction (tensor_fraction),
    else what a measured SGEMM says of the clock, typical_tensor_fraction x min(1, s / s_typical), s the SGEMM's
    fraction of the FP32 peak and s_typical the median of its class (SERIAL_ / PAIRED_FP32_GEMM_FRACTION), else a
    sourced clock under load below boost (typical_tensor_fraction x clock / boost: the L40's, from its binding
    sibling), else None.
    Only a shortfall counts: an SGEMM above its class's median is the library's kernel on that chip, not a clock above
    boost."""
    phi = tensor_fraction(spec)
    if phi is not None or spec.vendor != "nvidia":
        return phi
    simt = _number(spec.extra.get("fp32_gemm_sustained_tflops"))
    if simt is not None and spec.fp32_tflops:
        typical = SERIAL_FP32_GEMM_FRACTION if "fp32" in serial_pipes(spec) else PAIRED_FP32_GEMM_FRACTION
        return typical_tensor_fraction(spec) * min(1.0, simt / spec.fp32_tflops / typical)
    clock = _number(spec.extra.get("sm_clock_sustained_mhz"))  # a sourced clock under load, below boost: that share
    if clock is not None and clock < spec.boost_clock_mhz:
        return typical_tensor_fraction(spec) * clock / spec.boost_clock_mhz
    return None


def _sibling_dtype(spec: GpuSpec, dtype: str) -> float | None:
    """A missing fp16 (bf16) figure from the sourced bf16 (fp16) one of the same GPU: the two share the tensor pipe
    at the same datasheet peak on every NVIDIA part since Ampere, so the measured ratio carries over."""
    other = {"fp16": "bf16", "bf16": "fp16"}.get(dtype, "")
    value = _number(spec.extra.get(f"tensor_sustained_tflops_{other}"))
    if value is None or other not in spec.tensor_tflops:
        return None
    return value * spec.tensor_tflops[dtype] / spec.tensor_tflops[other]


def _dram_gbs(spec: GpuSpec, missing: list[str]) -> float:
    measured = _number(spec.extra.get("memory_bandwidth_achievable_gbs"))
    if measured is not None:
        return measured
    efficiency = _number(spec.extra.get("dram_efficiency"))
    if efficiency is None:
        missing.append("memory_bandwidth_achievable_gbs")
        efficiency = DRAM_EFFICIENCY
    return efficiency * spec.memory_bandwidth_gbs


def _clock_mhz(spec: GpuSpec, phi: float | None, missing: list[str]) -> float:
    """The sourced sustained SM clock, else the boost clock held down by the power limit phi shows (module doc)."""
    if _number(spec.extra.get("sm_clock_sustained_mhz")) is None:
        missing.append("sm_clock_sustained_mhz")
    return _clock_and_basis(spec, phi)[0]


def clock_basis(spec: GpuSpec) -> str:
    """In words, what sets ``rates(spec).clock_mhz``, the SM clock under load (module doc, "Power"), and the clock of
    tensor-core work where it is lower: for `gpus`."""
    clock, basis = _clock_and_basis(spec, power_fraction(spec))
    tensor_clock = _tensor_clock_mhz(spec, clock)
    return basis + (f"; tensor work at {tensor_clock:.0f} MHz (datasheet tensor clock)" if tensor_clock else "")


def _clock_and_basis(spec: GpuSpec, phi: float | None) -> tuple[float, str]:
    """The SM clock under load (MHz) and what sets it: a sourced figure, else boost x min(1, phi / phi_typical), never
    below the base clock (module doc)."""
    measured = _number(spec.extra.get("sm_clock_sustained_mhz"))
    if measured is not None:
        return measured, "catalog: " + str(spec.extra.get("sm_clock_sustained_source", "sourced")).split(":")[0]
    if phi is None:
        return spec.boost_clock_mhz, "boost: no matmul of this card catalogued"
    if tensor_fraction(spec) is not None:
        seen = f"tensor matmul at {phi:.2f} of peak"
    else:
        simt = _number(spec.extra.get("fp32_gemm_sustained_tflops"))
        seen = f"SGEMM at {simt / spec.fp32_tflops:.2f} of FP32 peak" if simt else "its catalogued clock"
    held = spec.boost_clock_mhz * min(1.0, phi / typical_tensor_fraction(spec))
    base = _number(spec.extra.get("base_clock_mhz"))  # the guaranteed minimum under load (module doc)
    floor = min(base, spec.boost_clock_mhz) if base is not None else 0.0
    if held >= spec.boost_clock_mhz:
        return held, f"boost: {seen}"
    return max(held, floor), f"{'base clock (floor)' if held < floor else 'power limit'}: {seen}"


def _tensor_clock_mhz(spec: GpuSpec, clock: float) -> float | None:
    """The clock under tensor-core load where the datasheet quotes the tensor peaks below ``clock`` (module doc)."""
    quoted = _number(spec.extra.get("tensor_clock_mhz_implied"))
    return quoted if quoted is not None and quoted < clock else None


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

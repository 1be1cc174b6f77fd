"""Frozen GPU descriptions: the contract between the catalog (specs.py, specs/gpus.toml) and the models.

Units are in the field names. Tensor peaks are dense (no 2:4 sparsity), FP32-accumulate.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Mapping, Optional

# GFXIP major.minor an AMD device reports as computeMajor/computeMinor, per LLVM target (ROCm docs, "AMD GPU
# specifications", GFXIP Major/Minor columns): gfx908 and gfx90a both report 9.0.
GFXIP_VERSION = {"gfx908": (9, 0), "gfx90a": (9, 0), "gfx942": (9, 4), "gfx950": (9, 5)}


# The precision a model runs in on a GPU without a tensor path for its dtype, first available wins. FP8
# (Transformer Engine, torchao float8, DeepGEMM) needs Hopper/Ada or newer: on an A100 the same model runs in
# BF16 (its FP8 recipes keep BF16 master weights and BF16 for the ops they do not quantize). BF16 tensor cores
# start with Ampere (A100 whitepaper); Volta and Turing have FP16 tensor cores only (V100, Turing whitepapers),
# where BF16 matmuls leave the tensor cores, so a model is run there in FP16 autocast (torch.autocast's CUDA
# default dtype). A prediction that takes this path says so (engine: a reason per kernel and one warning).
PRECISION_FALLBACK: Mapping[str, tuple[str, ...]] = {"fp4": ("fp8", "bf16", "fp16"), "fp8": ("bf16", "fp16"),
                                                     "bf16": ("fp16",)}


@dataclass(frozen=True)
class OccupancyLimits:
    """Per-compute-capability limits used by the CUDA occupancy rules (CUDA C++ Programming Guide,
    'Technical Specifications per Compute Capability'; allocation units from cuda_occupancy.h)."""

    compute_capability: str
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_alloc_unit: int  # registers, allocated per warp
    warp_alloc_granularity: int  # SM sub-partitions: warps per block round up to this
    shared_mem_per_sm_bytes: int
    shared_mem_carveout_kib: tuple[int, ...]
    shared_mem_per_block_optin_bytes: int
    shared_mem_alloc_unit_bytes: int
    reserved_shared_mem_per_block_bytes: int  # 1 KiB from cc 8.0
    source: str = ""


@dataclass(frozen=True)
class Price:
    usd_per_hour: float  # per GPU
    provider: str
    date: str
    source: str


@dataclass(frozen=True)
class GpuSpec:
    name: str  # catalog name, e.g. "H100 SXM5 80GB"
    architecture: str
    compute_capability: str  # "9.0"
    sms: int
    boost_clock_mhz: float
    memory_gib: float
    memory_bandwidth_gbs: float  # 1e9 B/s
    l2_cache_mib: float
    fp32_tflops: float  # CUDA-core FP32 peak
    tensor_tflops: Mapping[str, float]  # dense peaks by dtype: tf32, fp16, bf16, fp8, fp32 (AMD matrix FP32); absent: none
    tdp_w: float
    interconnect: str
    source: str
    occupancy: OccupancyLimits
    price: Optional[Price] = None
    device_names: tuple[str, ...] = ()  # names torch/Kineto report in deviceProperties
    aliases: tuple[str, ...] = ()
    base: Optional[str] = None  # catalog entry this one inherits from (what-if GPUs)
    extra: Mapping[str, object] = field(default_factory=dict)  # other sourced fields (fp64, pcie, ...)
    # the resolved ``base`` entry (specs.py sets it): a what-if GPU runs its base's kernels (scale/engine.py)
    base_spec: Optional["GpuSpec"] = field(default=None, repr=False, compare=False)

    @property
    def vendor(self) -> str:
        """"amd" for a CDNA entry (compute_capability is an LLVM gfx target), else "nvidia"."""
        return "amd" if self.compute_capability.startswith("gfx") else "nvidia"

    @property
    def compute_version(self) -> tuple[int, int]:
        """(computeMajor, computeMinor) as torch reports them: the compute capability, or an AMD target's GFXIP."""
        if self.vendor == "amd":
            return GFXIP_VERSION.get(self.compute_capability, (9, 0))
        major, _, minor = self.compute_capability.partition(".")
        return int(major), int(minor or 0)

    def pipe_peak_tflops(self, pipe: str) -> float:
        """Peak of the pipe a kernel runs on: "fp32" is the CUDA cores (AMD: vector ALUs), "matrix-fp32" AMD's
        FP32 matrix cores (MFMA; the CUDA cores on NVIDIA), any other name a tensor dtype."""
        if pipe == "matrix-fp32":
            return float(self.tensor_tflops.get("fp32", self.fp32_tflops))
        return self.fp32_tflops if pipe == "fp32" else self.tensor_peak_tflops(pipe)

    def tensor_pipe(self, dtype: str) -> str:
        """The tensor path ``dtype`` work runs on here: ``dtype`` itself when the GPU has it, else the precision a
        model is run in on this GPU (``PRECISION_FALLBACK``), else "fp32" (CUDA cores: TF32 on a pre-Ampere
        GPU is FP32, FP16 on a Pascal GPU has no tensor cores)."""
        if dtype in self.tensor_tflops or (dtype == "matrix-fp32" and "fp32" in self.tensor_tflops):
            return dtype  # matrix-fp32: AMD's FP32 matrix cores, listed as the "fp32" tensor peak (pipe_peak_tflops)
        return next((d for d in PRECISION_FALLBACK.get(dtype, ()) if d in self.tensor_tflops), "fp32")

    def tensor_peak_tflops(self, dtype: str) -> float:
        """Dense tensor-core peak of ``tensor_pipe(dtype)``; the FP32 CUDA-core peak when that is "fp32"."""
        pipe = self.tensor_pipe(dtype)
        return self.fp32_tflops if pipe == "fp32" else float(self.tensor_tflops[pipe])

    def with_sms(self, sms: int) -> "GpuSpec":
        """This GPU with ``sms`` SMs (a green context, or the SMs a collective leaves): the compute peaks scaled by
        the SM count, as specs.py scales a what-if entry's (peak FLOP/s = SMs x FLOP/clk/SM x clock); memory
        bandwidth, L2 and clocks unchanged."""
        f = float(sms) / float(self.sms)
        extra = {k: (float(v) * f if k == "fp64_tflops" and isinstance(v, (int, float)) else v)
                 for k, v in self.extra.items()}
        return replace(self, sms=int(sms), fp32_tflops=self.fp32_tflops * f, extra=extra,
                       tensor_tflops={k: float(v) * f for k, v in self.tensor_tflops.items()})


def spec_fields(spec: GpuSpec) -> dict[str, object]:
    """The spec's fields (dataclasses.asdict), without ``base_spec``: a what-if GPU's base is named by ``base``, the
    resolved entry is not repeated in reports and documents."""
    out = asdict(replace(spec, base_spec=None))
    del out["base_spec"]
    return out

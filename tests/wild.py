"""Minimal synthetic Kineto traces of the recordings issue 18 ran into ("traces from the wild").

Each trace is one or more ProfilerSteps of ops, each op launching its kernels through cudaLaunchKernel, in
the Kineto 2.x JSON format (deviceProperties, cpu_op / cuda_runtime / kernel events linked by External id and
correlation, ac2g flows). Kernel names, launching ops and deviceProperties names are the real ones the
issue quotes or that public profiles of vLLM, SGLang, FlashInfer, TensorRT-LLM, DeepGEMM, cuDNN and NCCL show
(tests/data/README.md); durations, grids and shapes are chosen, not measured. ``write`` saves one gzipped.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


@dataclass(frozen=True)
class Kernel:
    name: str
    dur_us: float
    grid: tuple[int, int, int] = (1024, 1, 1)
    block: tuple[int, int, int] = (256, 1, 1)
    registers: int = 32
    smem: int = 0


@dataclass(frozen=True)
class Op:
    name: str
    kernels: tuple[Kernel, ...]
    dims: Optional[list[Any]] = None  # "Input Dims"
    types: Optional[list[str]] = None  # "Input type"
    dims_key: str = "Input Dims"  # PyTorch 1.8 wrote "Input dims"
    extra_args: dict[str, Any] = field(default_factory=dict)


def device(name: str, major: int, minor: int, sms: int, mem_gib: float) -> dict[str, Any]:
    return {"id": 0, "name": name, "totalGlobalMem": int(mem_gib * 2**30), "computeMajor": major,
            "computeMinor": minor, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
            "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": sms}


def document(dev: Optional[dict[str, Any]], ops: list[Op], steps: int = 2, gap_us: float = 5.0) -> dict[str, Any]:
    """A Kineto document: ``steps`` ProfilerSteps, each launching every op of ``ops`` once, in order."""
    events: list[dict[str, Any]] = []
    ext = corr = 1
    cpu_t = gpu_t = 1_000.0
    for step in range(steps):
        step_start = cpu_t
        step_ev = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": step_start, "dur": 0.0, "args": {"External id": ext}}
        events.append(step_ev)
        ext += 1
        for op in ops:
            op_start = cpu_t + 1.0
            args: dict[str, Any] = {"External id": ext, **op.extra_args}
            if op.dims is not None:
                args[op.dims_key] = op.dims
                args["Input type"] = op.types or []
            op_ev = {"ph": "X", "cat": "cpu_op", "name": op.name, "pid": 1, "tid": 1, "ts": op_start, "args": args}
            events.append(op_ev)
            t = op_start + 1.0
            for k in op.kernels:
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                               "ts": t, "dur": 3.0, "args": {"External id": ext, "cbid": 211, "correlation": corr}})
                gpu_t = max(gpu_t, t + 4.0)
                events.append({"ph": "X", "cat": "kernel", "name": k.name, "pid": 0, "tid": 7, "ts": gpu_t,
                               "dur": k.dur_us, "args": {
                                   "External id": ext, "device": 0, "stream": 7, "correlation": corr,
                                   "registers per thread": k.registers, "shared memory": k.smem,
                                   "grid": list(k.grid), "block": list(k.block)}})
                events.append({"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": t, "cat": "ac2g", "name": "ac2g"})
                events.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": gpu_t, "cat": "ac2g",
                               "name": "ac2g", "bp": "e"})
                gpu_t += k.dur_us + 1.0
                t += 4.0
                corr += 1
            op_ev["dur"] = t - op_start + 1.0
            cpu_t = t + gap_us
            ext += 1
        cpu_t = max(cpu_t, gpu_t) + 10.0  # the step ends with a synchronize
        step_ev["dur"] = cpu_t - step_start
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    if dev is not None:
        doc["deviceProperties"] = [dev]
    return doc


def write(path: Path, doc: dict[str, Any]) -> Path:
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


# ---- the cases of issue 18 (device names as torch reports them) ---------------------------------------------------
BF16, FP32, HALF = "c10::BFloat16", "float", "c10::Half"
NCCL_ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
ADD_BF16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
ADD_FP32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)")
MUL_HALF = ("void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<c10::Half>, "
            "std::array<char*, 3ul> >(int, at::native::MulFunctor<c10::Half>, std::array<char*, 3ul>)")
DEEPGEMM_FP8 = ("void deep_gemm::fp8_gemm_kernel<4096u, 7168u, 128u, 160u, 128u, 0u, 64u, 9u, 4u, 128u, 128u, 1u, "
                "true, (deep_gemm::GemmType)1>(__nv_bfloat16*, float*, int*, unsigned int, CUtensorMap_st, "
                "CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)")
RESHAPE_AND_CACHE = ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, "
                     "(vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, "
                     "unsigned char*, long const*, long, long, long, long, long, int, int, int, float const*, "
                     "float const*, int)")
TRTLLM_FP8_ATTENTION = ("fmhaSm100fKernel_QkvE4m3OBfloat16HQk576HV512PagedKvDenseStaticTokenSparseP1VarSeqQ16Kv128"
                        "PersistentSwapsAbForGen")
MULTIMEM_ALLREDUCE = ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
                      "unsigned long, unsigned int**, unsigned long, unsigned long)")
NVJET_SM100 = "nvjet_sm100_tst_128x256_64x6_2x1_2cta_v_bz_TNT"
NVJET_SM90 = "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
FLASH_FWD = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
             "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, "
             "false, true, true, false, false>(pytorch_flash::Flash_fwd_params)")
LAYER_NORM_BF16 = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, "
                   "float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, "
                   "c10::BFloat16*)")
EMBEDDING_BAG = ("void at::native::(anonymous namespace)::EmbeddingBag_updateOutputKernel_sum_mean<float, long>(long "
                 "const*, long const*, float const*, float*, long*, long, long, long, long, long, long, float const*, "
                 "long, long)")


def h100_hf_inference() -> dict[str, Any]:
    """Hugging Face bf16 inference on the bare "NVIDIA H100" (Kineto's documentation trace names it so)."""
    mm = Op("aten::mm", (Kernel(NVJET_SM90, 90.0, (132, 1, 1), (384, 1, 1), 168, 200_000),),
            [[2048, 4096], [4096, 4096]], [BF16, BF16])
    attn = Op("aten::_scaled_dot_product_flash_attention", (Kernel(FLASH_FWD, 120.0, (16, 32, 1), (128, 1, 1), 255,
                                                                   49_152),),
              [[1, 32, 2048, 128], [1, 32, 2048, 128], [1, 32, 2048, 128], [], [], [], []], [BF16] * 3 + ["Scalar"] * 4)
    ln = Op("aten::layer_norm", (Kernel(LAYER_NORM_BF16, 12.0, (2048, 1, 1), (256, 1, 1)),),
            [[1, 2048, 4096], [], [4096], [4096], []], [BF16, "", BF16, BF16, "Scalar"])
    add = Op("aten::add", (Kernel(ADD_BF16, 10.0, (4096, 1, 1), (128, 1, 1)),),
             [[1, 2048, 4096], [1, 2048, 4096], []], [BF16, BF16, "Scalar"])
    return document(device("NVIDIA H100", 9, 0, 132, 79.2), [mm, attn, ln, add])


def h800_deepseek_fp8() -> dict[str, Any]:
    """DeepSeek-V3-style FP8 training step on an H800: DeepGEMM grouped FP8 GEMMs, quantization, NCCL."""
    gemm = Op("m_grouped_gemm_fp8_fp8_bf16_nt_contiguous",
              (Kernel(DEEPGEMM_FP8, 900.0, (132, 1, 1), (384, 1, 1), 168, 232_448),))
    quant = Op("per_token_group_quant_fp8", (Kernel("_per_token_group_quant_fp8", 40.0, (8192, 1, 1),
                                                     (128, 1, 1)),))
    add = Op("aten::add", (Kernel(ADD_BF16, 60.0, (16384, 1, 1), (128, 1, 1)),),
             [[4096, 7168], [4096, 7168], []], [BF16, BF16, "Scalar"])
    comm = Op("record_param_comms", (Kernel(NCCL_ALLGATHER, 150.0, (16, 1, 1), (512, 1, 1)),))
    return document(device("NVIDIA H800", 9, 0, 132, 79.3), [gemm, quant, add, comm])


def b200_vllm_fp8() -> dict[str, Any]:
    """A vLLM decode step with an FP8 KV cache on a B200."""
    cache = Op("_C_cache_ops::reshape_and_cache_flash", (Kernel(RESHAPE_AND_CACHE, 4.3, (64, 1, 1), (512, 1, 1)),))
    attn = Op("vllm::unified_attention_with_output",
              (Kernel(TRTLLM_FP8_ATTENTION, 30.0, (148, 1, 1), (512, 1, 1), 128, 200_000),))
    mm = Op("aten::mm", (Kernel(NVJET_SM100, 8.0, (148, 1, 1), (384, 1, 1), 168, 200_000),),
            [[64, 7168], [7168, 2048]], [BF16, BF16])
    norm = Op("_C::rms_norm", (Kernel("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, "
                                      "c10::BFloat16 const*, float, int, int)", 3.0, (64, 1, 1), (1024, 1, 1)),))
    act = Op("_C::silu_and_mul", (Kernel("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<"
                                         "c10::BFloat16>, (bool)1>(c10::BFloat16*, c10::BFloat16 const*, int)", 3.0,
                                         (64, 1, 1), (1024, 1, 1)),))
    ar = Op("vllm::all_reduce", (Kernel(MULTIMEM_ALLREDUCE, 12.0, (16, 1, 1), (512, 1, 1)),))
    return document(device("NVIDIA B200", 10, 0, 148, 178.4), [cache, attn, mm, norm, act, mm, ar])


def b300_moe() -> dict[str, Any]:
    """An MoE serving step on a B300 (cc 10.3): bf16 GEMMs, a Triton MoE GEMM, cuDNN attention, fused all-reduce."""
    mm = Op("aten::mm", (Kernel(NVJET_SM100, 40.0, (148, 1, 1), (384, 1, 1), 168, 200_000),),
            [[1024, 7168], [7168, 4096]], [BF16, BF16])
    moe = Op("vllm::outplace_fused_experts", (Kernel("fused_moe_kernel", 80.0, (512, 1, 1), (128, 1, 1), 96,
                                                     65_536),))
    attn = Op("aten::_scaled_dot_product_cudnn_attention",
              (Kernel("cudnn_generated_fort_native_sdpa_sm100_flash_fprop_f16", 50.0, (8, 32, 1), (128, 1, 1), 168,
                      131_072),),
              [[4, 32, 1024, 128], [4, 32, 1024, 128], [4, 32, 1024, 128], [], [], [], []],
              [BF16] * 3 + ["Scalar"] * 4)
    ar = Op("flashinfer::trtllm_allreduce_fusion", (Kernel(
        "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<(flashinfer::"
        "trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, false, false>(flashinfer::"
        "trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>)", 20.0, (32, 1, 1), (512, 1, 1)),))
    return document(device("NVIDIA B300 SXM6 AC", 10, 3, 148, 268.0), [mm, moe, attn, ar])


def v100_dlrm() -> dict[str, Any]:
    """A DLRM rank on a V100: small FP32 GEMMs (the 512x512x16 aten::mm of issue 18), embedding bags, NCCL."""
    mm = Op("aten::mm", (Kernel("volta_sgemm_32x128_nn", 6.0, (4, 16, 1), (256, 1, 1), 57, 16_384),),
            [[512, 16], [16, 512]], [FP32, FP32])
    emb = Op("aten::embedding_bag", (Kernel(EMBEDDING_BAG, 30.0, (2048, 1, 1), (256, 1, 1)),))
    add = Op("aten::add", (Kernel(ADD_FP32, 8.0, (1024, 1, 1), (128, 1, 1)),),
             [[512, 512], [512, 512], []], [FP32, FP32, "Scalar"])
    comm = Op("nccl:all_reduce", (Kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 10.0, (4, 1, 1),
                                         (256, 1, 1)),))
    return document(device("Tesla V100-SXM2-16GB", 7, 0, 80, 15.8), [mm, emb, mm, add, comm])


def rtx2080ti_amp_no_shapes() -> dict[str, Any]:
    """fp16 AMP training on an RTX 2080 Ti recorded without record_shapes (no memory evidence)."""
    mm = Op("aten::mm", (Kernel("turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn", 120.0, (68, 1, 1), (256, 1, 1),
                                128, 65_536),))
    mul = Op("aten::mul", (Kernel(MUL_HALF, 25.0, (4096, 1, 1), (128, 1, 1)),))
    grad = Op("torch::autograd::AccumulateGrad", (Kernel(MUL_HALF, 5.0, (512, 1, 1), (128, 1, 1)),))
    return document(device("NVIDIA GeForce RTX 2080 Ti", 7, 5, 68, 10.8), [mm, mul, grad])


def gp100_fp32() -> dict[str, Any]:
    """fp32 training on a Quadro GP100 (cc 6.0)."""
    mm = Op("aten::mm", (Kernel("maxwell_sgemm_128x64_nn", 1050.0, (32, 16, 1), (128, 1, 1), 120, 12_544),),
            [[2048, 1024], [1024, 2048]], [FP32, FP32])
    add = Op("aten::add", (Kernel(ADD_FP32, 50.0, (4096, 1, 1), (128, 1, 1)),),
             [[2048, 2048], [2048, 2048], []], [FP32, FP32, "Scalar"])
    return document(device("Quadro GP100", 6, 0, 56, 15.9), [mm, add])


def cupti_counters() -> dict[str, Any]:
    """A CUPTI range-profiler trace: ops, and each kernel only as a 'cuda_profiler_range' event with counters."""
    doc = document(device("NVIDIA H100 80GB HBM3", 9, 0, 132, 79.2), [
        Op("aten::mm", (Kernel(NVJET_SM90, 60.0),), [[2048, 4096], [4096, 4096]], [BF16, BF16])], steps=1)
    events = []
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e = {"ph": "X", "cat": "cuda_profiler_range", "name": e["name"], "pid": 0, "tid": 7, "ts": e["ts"],
                 "dur": e["dur"], "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 0,
                                           "sm__throughput.avg.pct_of_peak_sustained_elapsed": 81.5}}
        elif e.get("cat") in ("cuda_runtime", "ac2g"):
            continue  # the range profiler replays kernels; no CUDA activity records
        events.append(e)
    return dict(doc, traceEvents=events)


def pytorch18_lowercase_dims() -> dict[str, Any]:
    """A PyTorch 1.8-era trace (2021): op shapes under "Input dims" (lower-case d)."""
    mm = Op("aten::mm", (Kernel("volta_sgemm_128x64_nn", 200.0, (32, 16, 1), (256, 1, 1), 126, 16_384),),
            [[2048, 1024], [1024, 2048]], [FP32, FP32], dims_key="Input dims")
    return document(device("Tesla V100-SXM2-16GB", 7, 0, 80, 15.8), [mm])

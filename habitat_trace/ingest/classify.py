"""Kernel classes, from the kernel name, with the launching op deciding between library classes (a cuDNN
convolution kernel named like a GEMM is a conv); the op never turns a non-library kernel into a library one.

Classes decide how a kernel is scaled: library-chosen kernels (gemm, conv, attention) may differ
per GPU; everything else runs the same code on every GPU of an architecture family.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

GEMM, CONV, ATTENTION, RNN = "gemm", "conv", "attention", "rnn"
ELEMENTWISE, REDUCTION, NORM, SOFTMAX = "elementwise", "reduction", "norm", "softmax"
OPTIMIZER, EMBEDDING, COPY, NCCL, TRITON, OTHER = "optimizer", "embedding", "copy", "nccl", "triton", "other"
LIBRARY_CLASSES = (GEMM, CONV, ATTENTION, RNN)  # cuBLAS/cuDNN/flash pick different kernels per GPU

# Ordered: the first matching pattern wins. Patterns on kernel names (case-insensitive).
# Serving stacks (vLLM, SGLang, FlashInfer, TensorRT-LLM) put words of other classes into their kernels'
# names: a KV-cache write is "reshape_and_cache_flash_kernel", an all-reduce "multimem_all_reduce_kernel",
# and every FlashInfer kernel lives in the namespace "flashinfer::" (norms, activations, sampling,
# all-reduce too). So collectives and cache writes come first, and "flash" counts as attention only when it
# is not the FlashInfer namespace (FlashInfer's attention kernels are named Batch/Single Prefill/Decode).
NAME_RULES: tuple[tuple[str, str], ...] = (
    # NCCL; symmetric-memory/NVLS all-reduce (PyTorch symm_mem, vLLM); vLLM/SGLang custom all-reduce;
    # FlashInfer/TensorRT-LLM fused all-reduce; DeepEP expert dispatch/combine
    (NCCL, r"^nccl|ncclDevKernel|ncclKernel|multimem_all|(?:one|two)_shot_all_?reduce|cross_device_reduce|"
           r"allreduce_fusion|all_?reduce_kernel|deep_ep::"),
    # paged KV-cache writes (vLLM cache_ops, SGLang): a scatter copy, whatever dtype the cache holds
    (COPY, r"reshape_and_cache|concat_and_cache|copy_blocks_kernel|swap_blocks|store_kvcache"),
    (ATTENTION, r"flash(?!infer)|fmha|attention|attn_|sdpa|(?:Batch|Single)(?:Prefill|Decode)With|mqa_logits|"
                r"flash_?mla|_mla_"),
    (COPY, r"nchwToNhwc|nhwcToNchw|transpose_readWrite|permute|transpose"),  # layout transforms stream memory
    (CONV, r"fprop|dgrad|wgrad|conv(?!ert)|winograd|implicit_convolve|cudnn::.*(?:fft|convolve)"),
    (RNN, r"lstm|rnn|gru_cell|elemWiseRNN"),
    (GEMM, r"gemm|gemv|cutlass|cublas|nvjet|xmma|matmul|wgmma|splitKreduce|marlin|fused_moe_kernel|^Cijk_|rocblas|"
           r"hipblaslt"),  # + Tensile/rocBLAS
    (TRITON, r"^triton_"),
    # rotary position embedding rotates q/k elementwise (no table lookup); gated activations (vLLM, FlashInfer)
    (ELEMENTWISE, r"rotary|act_and_mul"),
    (OPTIMIZER, r"multi_tensor_apply|fused_adam|_adam|adam_|_foreach|sgd_|_sgd|\blamb_"),
    (NORM, r"layer_norm|layernorm|batch_norm|batchnorm|bn_fw|bn_bw|group_norm|rms_?norm|welford"),
    (SOFTMAX, r"softmax"),
    (EMBEDDING, r"embedding|index_select|indexSelect|gather|scatter|index_put|take_along"),
    (REDUCTION, r"reduce|cross_entropy|nll_loss|sum_kernel|mean_kernel|argmax|max_kernel|norm_kernel|cub::"),
    (COPY, r"copy|memcpy|memset|cat_array|CatArray|fill"),
    (ELEMENTWISE, r"elementwise|vectorized|unrolled|pointwise|activation|gelu|relu|dropout|silu|tanh|sigmoid"),
)
# Rules on the innermost launching op name: library ops first. A cache-write op (vLLM's
# _C_cache_ops::reshape_and_cache_flash) turns a kernel named like attention into a copy.
OP_RULES: tuple[tuple[str, str], ...] = (
    (COPY, r"cache_ops::|reshape_and_cache|concat_and_cache"),
    (ATTENTION, r"attention|flash|efficient_attention|_sdpa"),
    (CONV, r"convolution|cudnn_conv|conv\d?d|conv_transpose|_convolution"),
    (RNN, r"_cudnn_rnn|lstm|gru|rnn"),
    (GEMM, r"aten::(?:mm|addmm|bmm|baddbmm|addbmm|matmul|linear|_scaled_mm|addmv|mv|dot)$"),
)
# Collective ops (c10d, the profiler's record_param_comms wrapper, symmetric memory, custom all-reduce ops): a
# kernel they launch whose name says nothing (other) or only "reduce" is the collective itself.
COLLECTIVE_OPS = r"^nccl:|^c10d::|record_param_comms|symm_mem::|all_?reduce|all_?gather|reduce_scatter|all_to_all"
# CuTe DSL (CUTLASS's Python DSL) names its JIT kernels "kernel_cutlass_<function>": the prefix says nothing of
# what the kernel computes (e.g. "kernel_cutlass_kernel_flashinfernormkernelsfused_add_rmsnorm" is a norm)
CUTE_DSL_PREFIX = re.compile(r"^kernel_cutlass_", re.IGNORECASE)
_NAME_RE = [(c, re.compile(p, re.IGNORECASE)) for c, p in NAME_RULES]
_OP_RE = [(c, re.compile(p, re.IGNORECASE)) for c, p in OP_RULES]
_COLLECTIVE_RE = re.compile(COLLECTIVE_OPS, re.IGNORECASE)


def classify_name(name: str) -> str:
    name = CUTE_DSL_PREFIX.sub("", name)
    for cls, rx in _NAME_RE:
        if rx.search(name):
            return cls
    return OTHER


def classify(names: pd.Series, cats: pd.Series, op_names: pd.Series) -> np.ndarray:
    """Class per GPU event. Copies/sets by category; a library op's name overrides ambiguous
    kernel names (e.g. cuDNN conv kernels named like GEMMs), but never turns an elementwise
    helper launched by the op (bias add, cast) into a library kernel."""
    # factorize (hashing) rather than np.unique (sorting long C++ names): same classes, faster
    inv, uniq = pd.factorize(names.astype(str), sort=False)
    by_name = np.array([classify_name(n) for n in uniq] or [OTHER], dtype=object)[inv]
    out = by_name.copy()
    out[(cats != "kernel").to_numpy()] = COPY
    ops_inv, ops_u = pd.factorize(op_names.fillna("").astype(str), sort=False)
    op_cls = np.array([_op_class(o) for o in ops_u] or [""], dtype=object)[ops_inv]
    library_kernel = np.isin(by_name, LIBRARY_CLASSES)
    take_op = library_kernel & (op_cls != "") & (out != COPY)
    out[take_op] = op_cls[take_op]
    collective_op = np.array([bool(_COLLECTIVE_RE.search(o)) for o in ops_u] or [False])[ops_inv]
    out[collective_op & np.isin(out, (OTHER, REDUCTION))] = NCCL
    return out.astype(str)


def _op_class(op: str) -> str:
    for cls, rx in _OP_RE:
        if rx.search(op):
            return cls
    return ""

"""Kernel classes, from the launching op (most reliable) and the kernel name (fallback).

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
NAME_RULES: tuple[tuple[str, str], ...] = (
    (NCCL, r"^nccl|ncclDevKernel|ncclKernel"),
    (ATTENTION, r"flash|fmha|attention|attn_|sdpa"),
    (COPY, r"nchwToNhwc|nhwcToNchw|transpose_readWrite|permute|transpose"),  # layout transforms stream memory
    (CONV, r"fprop|dgrad|wgrad|conv(?!ert)|winograd|implicit_convolve|cudnn::.*(?:fft|convolve)"),
    (RNN, r"lstm|rnn|gru_cell|elemWiseRNN"),
    (GEMM, r"gemm|cutlass|cublas|nvjet|xmma|matmul|wgmma|splitKreduce|^Cijk_|rocblas|hipblaslt"),  # + Tensile/rocBLAS
    (TRITON, r"^triton_"),
    (OPTIMIZER, r"multi_tensor_apply|fused_adam|_adam|adam_|_foreach|sgd_|_sgd|\blamb_"),
    (NORM, r"layer_norm|layernorm|batch_norm|batchnorm|bn_fw|bn_bw|group_norm|rms_?norm|welford"),
    (SOFTMAX, r"softmax"),
    (EMBEDDING, r"embedding|index_select|indexSelect|gather|scatter|index_put|take_along"),
    (REDUCTION, r"reduce|cross_entropy|nll_loss|sum_kernel|mean_kernel|argmax|max_kernel|norm_kernel|cub::"),
    (COPY, r"copy|memcpy|memset|cat_array|CatArray|fill"),
    (ELEMENTWISE, r"elementwise|vectorized|unrolled|pointwise|activation|gelu|relu|dropout|silu|tanh|sigmoid"),
)
# Rules on the innermost launching op name: library ops first.
OP_RULES: tuple[tuple[str, str], ...] = (
    (ATTENTION, r"attention|flash|efficient_attention|_sdpa"),
    (CONV, r"convolution|cudnn_conv|conv\d?d|conv_transpose|_convolution"),
    (RNN, r"_cudnn_rnn|lstm|gru|rnn"),
    (GEMM, r"aten::(?:mm|addmm|bmm|baddbmm|addbmm|matmul|linear|_scaled_mm|addmv|mv|dot)$"),
)
_NAME_RE = [(c, re.compile(p, re.IGNORECASE)) for c, p in NAME_RULES]
_OP_RE = [(c, re.compile(p, re.IGNORECASE)) for c, p in OP_RULES]


def classify_name(name: str) -> str:
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
    return out.astype(str)


def _op_class(op: str) -> str:
    for cls, rx in _OP_RE:
        if rx.search(op):
            return cls
    return ""

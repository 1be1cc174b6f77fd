"""FLOPs and DRAM bytes of an op from the shapes, dtypes and scalar arguments Kineto recorded.

Kineto records no hardware counters, so the memory/compute balance (γ) of a kernel comes from its
op's cost: GEMMs (2·M·N·K), convolutions (2·N·O·spatial_out·C/g·kernel per pass), attention
(FlashAttention's 4·B·H·L·S·D forward, 2.5x that backward; halved when causal), and for everything
else bytes = inputs + output, FLOPs ≈ elements. Returns NaN where the shapes were not recorded.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Optional, Sequence

import numpy as np

DTYPE_BYTES = {
    "float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8, "int": 4, "short int": 2,
    "bool": 1, "unsigned char": 1, "signed char": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1, "c10::complex<float>": 8,
}
DTYPE_NAME = {"float": "fp32", "double": "fp64", "c10::BFloat16": "bf16", "c10::Half": "fp16",
              "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8"}

def gemm_flops_bytes(b: Any, m: Any, n: Any, k: Any, element_bytes: float) -> tuple[Any, Any]:
    """FLOPs (2·B·M·N·K: a multiply and an add per term) and compulsory DRAM bytes (A, B and C once each) of a
    batched GEMM C[b] = A[b] (m x k) @ B[b] (k x n); numpy arrays or floats."""
    b, m, n, k = (np.asarray(x, dtype=np.float64) for x in (b, m, n, k))
    return 2.0 * b * m * n * k, element_bytes * b * (m * k + k * n + m * n)


GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
            "aten::_scaled_mm", "aten::addmv", "aten::mv", "aten::addbmm"}
# index of is_causal among each attention op's arguments (ATen native_functions.yaml signatures)
ATTENTION_CAUSAL_ARG = {
    "aten::scaled_dot_product_attention": 5,
    "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_efficient_attention": 6,
    "aten::_scaled_dot_product_cudnn_attention": 6,
    "aten::_flash_attention_forward": 8,
    "aten::_cudnn_attention_forward": 10,
    "aten::_scaled_dot_product_flash_attention_backward": 11,
    "aten::_flash_attention_backward": 11,
    "aten::_scaled_dot_product_cudnn_attention_backward": 14,
    "aten::_cudnn_attention_backward": 14,
    "aten::_scaled_dot_product_efficient_attention_backward": 13,
}
# The kernels' own ops take query, key and value as (batch, sequence, heads, head dim): the SDPA ops transpose their
# (batch, heads, sequence, head dim) inputs before calling them (aten/src/ATen/native/transformers/cuda/
# attention.cu, _scaled_dot_product_efficient_attention_cuda and _scaled_dot_product_flash_attention_cuda:
# q_t = query.transpose(1, 2)); the cuDNN ops keep SDPA's layout
SEQUENCE_MAJOR_ATTENTION = frozenset({"aten::_efficient_attention_forward", "aten::_efficient_attention_backward",
                                      "aten::_flash_attention_forward", "aten::_flash_attention_backward"})
BACKWARD_ATTENTION_FACTOR = 2.5  # FlashAttention-2 paper (Dao 2023), sec. 4: backward ≈ 2.5x forward FLOPs
_INTS = re.compile(r"-?\d+")


def op_cost(name: str, dims: Any, types: Any, concrete: Any) -> tuple[float, float, str]:
    """(flops, bytes, compute dtype) of one op; NaN flops/bytes when the shapes are unknown."""
    key = (name, _freeze(_list(dims)), _freeze(_list(types)), _freeze(_list(concrete)))
    return _op_cost(*key)


def _list(x: Any) -> list:
    """Recorded argument lists, or [] when absent or not a list (older or hand-edited traces)."""
    return x if isinstance(x, list) else []


@lru_cache(maxsize=65536)
def _op_cost(name: str, dims: tuple, types: tuple, concrete: tuple) -> tuple[float, float, str]:
    dtype = _compute_dtype(types)
    if not dims or not any((_is_shape(d) and d) or _is_shape_list(d) for d in dims):
        return math.nan, math.nan, dtype
    io = _io_bytes(name, dims, types)
    if name in GEMM_OPS:
        flops = _gemm_flops(name, dims)
    elif "convolution" in name or name.startswith("aten::conv"):
        flops = _conv_flops(name, dims, concrete)
    elif name in ATTENTION_CAUSAL_ARG or "attention" in name:
        flops = _attention_flops(name, dims, concrete)
    else:
        flops = float(max((_numel(d) for d in dims if _is_shape(d)), default=0))
    return flops, io, dtype


def _gemm_flops(name: str, dims: tuple) -> float:
    shapes = [d for d in dims if _is_shape(d) and len(d) >= 1]
    mats = [d for d in shapes if len(d) >= 2]
    if name == "aten::linear" and len(mats) >= 2:  # linear(input [..., K], weight [N, K], bias)
        x, w = mats[0], mats[1]
        return 2.0 * _numel(x[:-1]) * x[-1] * w[0]
    a_b = _gemm_operands(name, dims)
    if a_b is not None:
        a, b = a_b
        batch = max(_numel(a[:-2]), _numel(b[:-2]))
        return 2.0 * batch * a[-2] * a[-1] * b[-1]
    if len(shapes) >= 2:  # mv / dot
        return 2.0 * _numel(shapes[0])
    return math.nan


def gemm_dims(name: str, dims: Any) -> Optional[tuple[int, int, int, int]]:
    """(batch, M, N, K) of a GEMM op C[batch] = A (M x K) @ B (K x N), from its recorded input shapes;
    None for other ops, vector products, or shapes that were not recorded."""
    if name not in GEMM_OPS:
        return None
    return _gemm_dims(name, _freeze(_list(dims)))


@lru_cache(maxsize=65536)
def _gemm_dims(name: str, frozen: tuple) -> Optional[tuple[int, int, int, int]]:
    shapes = [d for d in frozen if _is_shape(d)]
    mats = [d for d in shapes if len(d) >= 2]
    if name == "aten::linear":  # linear(input [..., K], weight [N, K], bias)
        if len(mats) < 2:
            return None
        x, w = mats[0], mats[1]
        out = (1, _numel(x[:-1]), int(w[0]), int(x[-1]))
    else:
        a_b = _gemm_operands(name, frozen)
        if a_b is None:
            return None
        a, b = a_b
        out = (max(_numel(a[:-2]), _numel(b[:-2])), int(a[-2]), int(b[-1]), int(a[-1]))
    return out if min(out) >= 1 else None


def _conv_flops(name: str, dims: tuple, concrete: tuple) -> float:
    shapes = [d for d in dims if _is_shape(d)]
    if len(shapes) < 2 or len(shapes[0]) < 3:
        return math.nan
    if name == "aten::convolution_backward":  # (grad_output, input, weight, ..., output_mask)
        gout, weight = shapes[0], shapes[2] if len(shapes) > 2 else shapes[1]
        passes = sum(1 for m in str(concrete[-1]).split(",") if "True" in m) if concrete else 2
        return 2.0 * max(passes, 1) * gout[0] * gout[1] * _numel(gout[2:]) * _numel(weight[1:])
    x, w = shapes[0], shapes[1]
    if "transpose" in name:  # weight [C_in, O/g, k...]: every input pixel scatters O/g·k outputs
        return 2.0 * x[0] * x[1] * _numel(x[2:]) * _numel(w[1:])
    stride = _conv_arg(name, concrete, "stride", len(x) - 2)
    out_spatial = [max(1, math.ceil(h / s)) for h, s in zip(x[2:], stride)]
    return 2.0 * x[0] * w[0] * _numel(out_spatial) * _numel(w[1:])


def _conv_arg(name: str, concrete: tuple, what: str, nd: int) -> list[int]:
    # argument positions: cudnn_convolution(self, weight, padding, stride, ...);
    # convolution/_convolution/conv2d(input, weight, bias, stride, padding, ...)
    pos = {"aten::cudnn_convolution": 3, "aten::mkldnn_convolution": 4}.get(name, 3)
    vals = _ints(concrete[pos]) if len(concrete) > pos else []
    return vals if len(vals) == nd and all(v > 0 for v in vals) else [1] * nd


ATTENTION_TILE = 128  # query rows per thread block of FlashAttention-2/3 and cuDNN's fused attention kernels


def attention_tiles(name: str, dims: Any) -> float:
    """Output tiles of a fused attention op (FlashAttention, cuDNN, memory-efficient): B x H x ceil(L_q / 128), the
    blocks its kernel spreads over the SMs (Dao, "FlashAttention-2", 2023, sec. 3.2: one block per 128 query rows of
    one head; the backward's per key block, the same count for self-attention); NaN for other ops or unknown shapes."""
    if not (name in ATTENTION_CAUSAL_ARG or "attention" in name):
        return math.nan
    frozen = _freeze(_list(dims))
    shapes = [d for d in frozen if _is_shape(d) and len(d) == 4]
    q = shapes[1] if "backward" in name and len(shapes) >= 4 else shapes[0] if len(shapes) >= 3 else None
    if q is None:
        return math.nan
    b, h, lq = (q[0], q[2], q[1]) if name in SEQUENCE_MAJOR_ATTENTION else (q[0], q[1], q[2])
    return float(b * h * math.ceil(lq / ATTENTION_TILE))


def _attention_flops(name: str, dims: tuple, concrete: tuple) -> float:
    shapes = [d for d in dims if _is_shape(d) and len(d) == 4]
    backward = "backward" in name
    if backward and len(shapes) >= 4:
        q, k, v = shapes[1], shapes[2], shapes[3]
    elif len(shapes) >= 3:
        q, k, v = shapes[0], shapes[1], shapes[2]
    else:
        return math.nan
    if name in SEQUENCE_MAJOR_ATTENTION:
        q, k, v = ((t[0], t[2], t[1], t[3]) for t in (q, k, v))
    b, h, lq, d = q
    flops = 2.0 * b * h * lq * k[2] * (d + v[3])
    idx = ATTENTION_CAUSAL_ARG.get(name)
    if idx is not None and len(concrete) > idx and str(concrete[idx]) == "True":
        flops /= 2
    return flops * (BACKWARD_ATTENTION_FACTOR if backward else 1.0)


def _io_bytes(name: str, dims: tuple, types: tuple) -> float:
    sizes = []
    for d, t in zip(dims, types):
        elt = DTYPE_BYTES.get(str(t), 0)
        if elt and _is_shape(d):
            sizes.append(_numel(d) * elt)
        elif str(t) == "TensorList" and isinstance(d, tuple):
            sizes.extend(_numel(x) * 4 for x in d if _is_shape(x))
    if not sizes:
        return math.nan
    out = 0.0 if name.endswith("_") else float(max(sizes))  # in-place ops write an input
    if name in GEMM_OPS:
        out = _gemm_out_bytes(name, dims, types)
    return float(sum(sizes) + out)


def in_place_write_bytes(name: str, dims: Any, types: Any) -> float:
    """Bytes an in-place op (relu_, add_, hardswish_) writes back into its self argument, which ``op_cost``'s bytes
    leave out (they count its inputs once: the convention the same-chip law's γ was validated with, README "How
    accurate"); 0 for other ops, NaN where the shapes are unknown. The cross-chip law adds it: an in-place op's DRAM
    traffic is its self tensor read and written."""
    if not name.endswith("_"):
        return 0.0
    dims, types = _list(dims), _list(types)
    if not dims or not types:
        return math.nan
    self_dims: Any = _freeze(dims[0])
    if str(types[0]) == "TensorList" and _is_shape_list(self_dims):
        # a foreach op's self tensors (the optimizers' _foreach_mul_, _foreach_addcdiv_, ...): Kineto records no dtype
        # for a TensorList, so 4 bytes an element as _io_bytes counts its inputs
        return float(sum(_numel(x) for x in self_dims) * 4)
    if not _is_shape(self_dims):
        return math.nan
    return float(_numel(self_dims) * DTYPE_BYTES.get(str(types[0]), 0))


def _gemm_operands(name: str, dims: tuple) -> Optional[tuple[tuple, tuple]]:
    """The two matrix operands: after the bias of addmm/baddbmm/addbmm, before an ``out=`` tensor."""
    shapes = [d for d in dims if _is_shape(d)]
    if name in ("aten::addmm", "aten::baddbmm", "aten::addbmm"):
        shapes = shapes[1:]
    if len(shapes) < 2 or len(shapes[0]) < 2 or len(shapes[1]) < 2:
        return None
    return shapes[0], shapes[1]


def _gemm_out_bytes(name: str, dims: tuple, types: tuple) -> float:
    elt = next((DTYPE_BYTES[str(t)] for t in types if str(t) in DTYPE_BYTES), 4)
    a_b = _gemm_operands(name, dims)
    if a_b is None:
        return 0.0
    a, b = a_b
    return float(max(_numel(a[:-2]), _numel(b[:-2])) * a[-2] * b[-1] * elt)


def _compute_dtype(types: tuple) -> str:
    for t in types:
        if str(t) in DTYPE_NAME:
            return DTYPE_NAME[str(t)]
    return "fp32"


def _is_shape(d: Any) -> bool:
    return isinstance(d, tuple) and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**40
                                        for x in d)


def _is_shape_list(d: Any) -> bool:
    """A TensorList argument's dims: a non-empty list of shapes (aten::cat, aten::stack, ...)."""
    return isinstance(d, tuple) and len(d) > 0 and all(_is_shape(x) and x for x in d)


def _numel(d: Sequence[int]) -> int:
    n = 1
    for x in d:
        n *= max(int(x), 0)
    return n


def _ints(s: Any) -> list[int]:
    return [int(x) for x in _INTS.findall(str(s))]


def _freeze(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x if x is None or isinstance(x, (int, float, str, bool)) else str(x)


SIMT_TAGS = ("simt", "sgemm", "ffma", "f32f32_f32f32_f32", "dgemm", "wgrad_alg0", "implicit_convolve")


_FOREACH_ELEMENT = re.compile(r"multi_tensor_apply_kernel<.*?Functor<\s*(c10::\w+|float|double)\b")


def foreach_byte_scale(kernel_name: str) -> float:
    """The factor that turns a foreach kernel's TensorList bytes, counted at 4 bytes an element (Kineto records no
    dtype for a TensorList), into its own element size: ATen's multi_tensor_apply_kernel names its element type as its
    functor's first template argument (``BinaryOpScalarFunctor<c10::BFloat16, ...>``: 0.5); 1 for other kernels."""
    m = _FOREACH_ELEMENT.search(kernel_name)
    size = DTYPE_BYTES.get(m.group(1)) if m else None
    return size / 4.0 if size else 1.0


@lru_cache(maxsize=16384)
def tensor_dtype_from_kernel(name: str, op_dtype: str = "fp32") -> Optional[str]:
    """Tensor-core dtype a library kernel runs, from its name (cuBLAS nvjet/xmma, cuDNN, CUTLASS naming);
    None for CUDA-core (SIMT) kernels. An unrecognised fp32 library kernel is taken as TF32 only when
    its name says so."""
    # vLLM's template argument "(vllm::Fp8KVCacheDataType)N" names the KV cache's storage, not a compute dtype
    # (its attention dequantizes to the activation dtype), and is there even when N = 0 (kAuto: no FP8)
    n = name.lower().replace("fp8kvcachedatatype", "")
    if n.startswith("cijk_") and "_mi" in n and op_dtype == "fp32":  # Tensile (rocBLAS/hipBLASLt) MFMA FP32 GEMM
        return "matrix-fp32"
    if n.startswith("nvjet"):  # cuBLAS's tensor-core JIT kernels; the name does not spell the input type
        return op_dtype if op_dtype in ("bf16", "fp16", "fp8") else "tf32"
    if any(tag in n for tag in SIMT_TAGS) and "tf32" not in n:
        return None
    for tag, dt in (("e4m3", "fp8"), ("e5m2", "fp8"), ("fp8", "fp8"), ("bf16", "bf16"), ("tf32", "tf32"),
                    ("s1688", "tf32"), ("s16816", "tf32"), ("f16", "fp16"), ("h1688", "fp16"), ("h16816", "fp16"),
                    ("hmma", "fp16"), ("tensorop", "fp16")):
        if tag in n:
            return dt
    return op_dtype if op_dtype in ("bf16", "fp16", "fp8") else None

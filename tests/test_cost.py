"""Golden FLOP/byte counts of the cost model (scale/cost.py): the inputs of γ and the roofline floor."""
from __future__ import annotations

import math

import pytest

from habitat_trace.scale.cost import (attention_tiles, foreach_byte_scale, in_place_write_bytes, op_cost,
                                      tensor_dtype_from_kernel)

F, BF = "float", "c10::BFloat16"


@pytest.mark.parametrize("name,dims,types,concrete,flops,nbytes", [
    # mm: 2*M*K*N, bytes = A + B + C
    ("aten::mm", [[3200, 1024], [1024, 32000]], [F, F], ["", ""], 2 * 3200 * 1024 * 32000,
     4 * (3200 * 1024 + 1024 * 32000 + 3200 * 32000)),
    # mm with out=: the third tensor is the output, not an operand (compiled graphs record it)
    ("aten::mm", [[8192, 768], [768, 50264], [8192, 50264]], [BF, BF, BF], ["", "", ""], 2 * 8192 * 768 * 50264,
     None),
    # addmm: the bias comes first
    ("aten::addmm", [[4096], [32, 25088], [25088, 4096], [], []], [F, F, F, "Scalar", "Scalar"], [""] * 5,
     2 * 32 * 25088 * 4096, None),
    # linear(input [..., K], weight [N, K])
    ("aten::linear", [[8, 1024, 768], [3072, 768], [3072]], [BF, BF, BF], ["", "", ""], 2 * 8 * 1024 * 768 * 3072,
     None),
    # convolution backward, both passes: 2 * 2 * N*O*Ho*Wo * C*kh*kw
    ("aten::convolution_backward", [[64, 2048, 7, 7], [64, 512, 7, 7], [2048, 512, 1, 1]] + [[]] * 8, [F] * 3 + ["x"] * 8,
     ["", "", "", "[0]", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"],
     2 * 2 * 64 * 2048 * 49 * 512, None),
    # strided forward conv: output spatial = ceil(H / stride)
    ("aten::cudnn_convolution", [[32, 3, 224, 224], [64, 3, 3, 3]] + [[]] * 7, [F, F] + ["x"] * 7,
     ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "", "", ""], 2 * 32 * 64 * 112 * 112 * 27, None),
    # causal attention forward: 2*B*H*L*S*(D+Dv) halved
    ("aten::_cudnn_attention_forward", [[8, 12, 1024, 64]] * 3 + [[]] * 10, [BF] * 3 + [""] * 10,
     ["", "", "", "", "", "", "1024", "1024", "True", "0.", "True", "False", ""], 2 * 8 * 12 * 1024 * 1024 * 128 / 2,
     None),
    # the efficient-attention kernel's own op takes (B, S, H, D) (the SDPA op's inputs transposed): BERT-base's
    # recorded [24, 384, 12, 64] is 2*24*12*384*384*128 FLOPs; read as (B, H, S, D) it was 32x short (issue 32)
    ("aten::_efficient_attention_forward", [[24, 384, 12, 64]] * 3 + [[]] * 11, [F] * 3 + [""] * 11, [""] * 14,
     2 * 24 * 12 * 384 * 384 * 128, None),
    ("aten::_efficient_attention_backward", [[24, 384, 12, 64]] * 4 + [[]] + [[24, 384, 12, 64]] + [[]] * 14,
     [F] * 4 + [""] + [F] + [""] * 14, [""] * 20, 2.5 * 2 * 24 * 12 * 384 * 384 * 128, None),
    # and its SDPA op, whose inputs are (B, H, S, D): the same count
    ("aten::_scaled_dot_product_efficient_attention", [[24, 12, 384, 64]] * 3 + [[]] * 5, [F] * 3 + [""] * 5,
     [""] * 8, 2 * 24 * 12 * 384 * 384 * 128, None),
    # TensorList argument (cat): bytes from the list's shapes (3 inputs + an output the size of the largest: 4 bytes
    # per element when the list's dtype is not recorded)
    ("aten::cat", [[[32, 12, 128, 64]] * 3, []], ["TensorList", "Scalar"], ["", "0"], 1, (3 + 1) * 32 * 12 * 128 * 64 * 4),
])
def test_golden_costs(name, dims, types, concrete, flops, nbytes) -> None:
    f, b, _ = op_cost(name, dims, types, concrete)
    assert f == pytest.approx(flops)
    if nbytes is not None:
        assert b == pytest.approx(nbytes)
    assert b > 0


def test_unknown_shapes_are_nan_not_errors() -> None:
    for dims, types in (([[], []], ["TensorList", "Scalar"]), (None, None), ("junk", 3), ([[True, -1]], [F])):
        f, b, dtype = op_cost("aten::_foreach_add_", dims, types, None)
        assert math.isnan(f) and math.isnan(b) and dtype == "fp32"


@pytest.mark.parametrize("kernel,op_dtype,pipe", [
    ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NNT", "bf16", "bf16"),
    ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NNT", "fp32", "tf32"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "fp32", "tf32"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>", "fp32", None),
    ("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nchw", "fp32", None),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "bf16", "bf16"),
])
def test_tensor_pipe_from_kernel_name(kernel: str, op_dtype: str, pipe) -> None:
    assert tensor_dtype_from_kernel(kernel, op_dtype) == pipe


def test_a_foreach_ops_self_tensors_are_written_back() -> None:
    """The optimizers' in-place foreach ops (_foreach_mul_, _foreach_addcdiv_, ...) write their self TensorList back:
    those bytes were unknown (NaN), which left every kernel of an AdamW or SGD step to the class default shares and
    moved a streaming optimizer step with SMs x clock instead of bandwidth (an H100's AdamW over 4.4B parameters 0.89x
    on a B200 with 2.2x its bandwidth; issue 32). 4 bytes an element, as the inputs of a TensorList are counted."""
    dims, types = [[[32000, 12288], [12288]], []], ["TensorList", "Scalar"]
    assert in_place_write_bytes("aten::_foreach_mul_", dims, types) == 4 * (32000 * 12288 + 12288)
    assert in_place_write_bytes("aten::_foreach_sqrt", dims, types) == 0.0  # not in place
    assert math.isnan(in_place_write_bytes("aten::_foreach_add_", [[[], []], [], []], ["TensorList", "float"]))


@pytest.mark.parametrize("name,dims,tiles", [
    # SDPA and cuDNN ops: (B, H, L, D); one tile per 128 query rows of one head
    ("aten::_scaled_dot_product_cudnn_attention", [[1, 64, 8192, 128]] * 3 + [[]] * 6, 1 * 64 * 64),
    ("aten::_scaled_dot_product_efficient_attention", [[24, 12, 384, 64]] * 3 + [[]] * 5, 24 * 12 * 3),
    # the kernels' own flash/efficient ops: (B, L, H, D)
    ("aten::_efficient_attention_forward", [[24, 384, 12, 64]] * 3 + [[]] * 11, 24 * 12 * 3),
    # backward: grad_out first, then query
    ("aten::_scaled_dot_product_cudnn_attention_backward", [[2, 16, 1000, 64]] * 4 + [[]] * 10, 2 * 16 * 8),
    ("aten::mm", [[128, 64], [64, 32]], math.nan),
    ("aten::_scaled_dot_product_cudnn_attention", [[], []], math.nan),
])
def test_attention_tiles(name: str, dims: list, tiles: float) -> None:
    got = attention_tiles(name, dims)
    assert got == tiles or (math.isnan(tiles) and math.isnan(got))


@pytest.mark.parametrize("kernel,scale", [
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
     "TensorListMetadata<3>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<c10::BFloat16, 3, 1, 1>, "
     "std::plus<float>, float>(T1, T2, T3, T4)", 0.5),
    ("multi_tensor_apply_kernel<TensorListMetadata<4>, PointwiseOpScalarFunctor<float, 4, 3, 0>>", 1.0),
    ("multi_tensor_apply_kernel<TensorListMetadata<2>, UnaryOpFunctor<c10::Half, 2, 1, 1>>", 0.5),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>", 1.0),
])
def test_a_foreach_kernel_names_its_element_size(kernel: str, scale: float) -> None:
    """TensorList bytes are counted at 4 bytes an element (Kineto records no dtype for them); a foreach kernel's name
    gives its own, which a bf16 model's AdamW step needs to be priced at its bandwidth, not twice it."""
    assert foreach_byte_scale(kernel) == scale

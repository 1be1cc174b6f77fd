"""The collector's workloads: name -> builder returning one full training (or inference) iteration.

A builder takes the device and ``tiny`` (CPU smoke sizes) and returns a ``Built``; the full sizes aim at
5-40 ms per iteration on an H100 SXM. Names carry batch, sequence/resolution and precision.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

import models as M


class SkipWorkload(Exception):
    """The workload cannot run here (e.g. torchvision missing in the CPU smoke test)."""


@dataclass(frozen=True)
class Built:
    step: Callable[[], None]
    note: str = ""  # how this run deviates from the name (fallbacks), recorded in ground_truth.jsonl


@dataclass(frozen=True)
class Workload:
    name: str
    build: Callable[[torch.device, bool], Built]
    est_s: float  # rough collect time on an H100 (build + warm-up + timing + profiling), for --budget-s


def _autocast(dev: torch.device, enabled: bool = True) -> torch.autocast:
    return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=enabled)


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, loss_fn: Callable[[], torch.Tensor],
                dev: torch.device, amp: bool) -> Callable[[], None]:
    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with _autocast(dev, amp):
            loss = loss_fn()
        loss.backward()
        opt.step()
    return step


def _lm_loss(model: nn.Module, idx: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: F.cross_entropy(model(idx).float().flatten(0, 1), idx.flatten())


def _torchvision_models():  # imported lazily: the CPU test environment has no torchvision
    try:
        import torchvision.models as tvm
    except ImportError as exc:
        raise SkipWorkload(f"torchvision not importable ({exc})") from exc
    return tvm


# ---------------------------------------------------------------- builders
def _llm_step(dev: torch.device, sizes: tuple[int, ...], note: str,
              trains: Callable[[str], bool] | None = None, fp8: bool = False) -> Built:
    """An M.Llama language-model training step in bf16 weights with AdamW, of (vocab, d, heads, layers, FFN, batch,
    seq); ``trains``: the parameters (by name) that train, the rest frozen (None: all); ``fp8``: the decoder layers'
    linears through _FP8Linear."""
    vocab, d, heads, layers, ffn, bs, seq = sizes
    model = M.Llama(vocab, d, heads, layers, ffn, seq).to(dev, torch.bfloat16)
    if fp8:
        for block in model.blocks:
            for lin in (m for m in block.modules() if isinstance(m, nn.Linear)):
                lin.forward = (lambda x, w=lin.weight: _FP8Linear.apply(x, w))  # type: ignore[method-assign]
    for name, p in model.named_parameters():
        p.requires_grad_(trains is None or trains(name))
    idx = torch.randint(0, vocab, (bs, seq), device=dev)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    return Built(_train_step(model, opt, _lm_loss(model, idx), dev, amp=False), note)


def llama(dev: torch.device, tiny: bool) -> Built:
    return _llm_step(dev, (256, 64, 4, 2, 128, 2, 32) if tiny else (32000, 1024, 16, 8, 2816, 4, 1024),
                     "bf16 weights, AdamW")


# (vocab, d, heads, layers, FFN, batch, seq) of the MLPerf-width LLM steps, by ``tiny``; LoRA's backward trains no base
# weight (the norms stand in for the adapters)
GPT3_WIDE = {True: (256, 64, 4, 1, 128, 1, 32), False: (32000, 12288, 96, 2, 32768, 1, 2048)}
LLAMA70B_WIDE = {True: (256, 64, 4, 1, 128, 1, 32), False: (32000, 8192, 64, 2, 28672, 1, 8192)}


def _lora_trains(name: str) -> bool:
    return ".n1." in name or ".n2." in name


def gpt3_layers(dev: torch.device, tiny: bool) -> Built:
    """Two decoder layers at GPT-3 175B's width (d 12288, 96 heads of 128; a SwiGLU MLP of 32768, the FLOPs of GPT-3's
    4d GELU MLP), seq 2048, batch 1, bf16 weights and AdamW: MLPerf Training's GPT-3 175B step, one GPU's layers of
    it (the benchmark shards 96 such layers over many GPUs, in FP8), for the public B200 figures (issue 32)."""
    return _llm_step(dev, GPT3_WIDE[tiny], "bf16 weights, AdamW; 2 of 96 layers")


def llama70b_lora_layers(dev: torch.device, tiny: bool) -> Built:
    """Two decoder layers at Llama 2 70B's width (d 8192, 64 heads, SwiGLU 28672; multi-head where Llama 2 70B
    groups its keys and values 8 ways), seq 8192, batch 1, bf16, base weights frozen: MLPerf Training's Llama 2 70B
    LoRA step (seq 8192), whose backward computes the activation gradients through every layer and no weight gradient
    of the base (the adapters, rank 16, are < 0.1% of its FLOPs: here the norms stand in as what trains)."""
    return _llm_step(dev, LLAMA70B_WIDE[tiny], "bf16, base frozen (norms train), multi-head attention; 2 of 80 layers",
                     trains=_lora_trains)


def vit_l16(dev: torch.device, tiny: bool) -> Built:
    tvm = _torchvision_models()
    bs, res = (2, 32) if tiny else (16, 224)
    model = (tvm.VisionTransformer(res, 16, 2, 2, 64, 128) if tiny else tvm.vit_l_16(weights=None)).to(dev)
    x, y = torch.randn(bs, 3, res, res, device=dev), torch.randint(0, 1000, (bs,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(x), y), dev, amp=True))


def t5(dev: torch.device, tiny: bool) -> Built:
    vocab, d, heads, layers, ffn, bs, src_len, tgt_len = (
        (256, 64, 4, 1, 128, 2, 32, 16) if tiny else (32128, 768, 12, 6, 3072, 16, 256, 128))
    model = M.Seq2SeqTransformer(vocab, d, heads, layers, ffn, src_len).to(dev)
    src = torch.randint(0, vocab, (bs, src_len), device=dev)
    tgt = torch.randint(0, vocab, (bs, tgt_len), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def loss() -> torch.Tensor:
        return F.cross_entropy(model(src, tgt).float().flatten(0, 1), tgt.flatten())
    return Built(_train_step(model, opt, loss, dev, amp=True))


def resnet152(dev: torch.device, tiny: bool) -> Built:
    tvm = _torchvision_models()
    bs, res = (2, 32) if tiny else (32, 224)
    model = (tvm.resnet18() if tiny else tvm.resnet152(weights=None)).to(dev, memory_format=torch.channels_last)
    x = torch.randn(bs, 3, res, res, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (bs,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(x), y), dev, amp=True))


def unet(dev: torch.device, tiny: bool) -> Built:
    c, bs, res = (32, 2, 16) if tiny else (128, 16, 64)
    model = M.UNet(c).to(dev)
    x = torch.randn(bs, 4, res, res, device=dev)
    noise = torch.randn_like(x)
    t = torch.randint(0, 1000, (bs,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.mse_loss(model(x + noise, t).float(), noise), dev, amp=True))


def unet_sd(dev: torch.device, tiny: bool) -> Built:
    """The latent-diffusion UNet at Stable Diffusion v2's width (320 channels, multipliers 1, 2, 4, 4) on its 64x64
    latents, batch 8, AMP: MLPerf Training's Stable Diffusion v2 step without its text encoder, VAE and cross-attention
    (this UNet attends only at its two lowest levels), for the public B200 figures (issue 32)."""
    c, mults, bs, res = (32, (1, 2), 2, 16) if tiny else (320, (1, 2, 4, 4), 8, 64)
    model = M.UNet(c, mults).to(dev)
    x = torch.randn(bs, 4, res, res, device=dev)
    noise = torch.randn_like(x)
    t = torch.randint(0, 1000, (bs,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.mse_loss(model(x + noise, t).float(), noise), dev, amp=True))


def graphsage(dev: torch.device, tiny: bool) -> Built:
    nodes, edges, din, hidden, classes = (500, 4000, 16, 16, 7) if tiny else (200_000, 2_000_000, 256, 256, 47)
    gen = torch.Generator(device=dev).manual_seed(0)
    src = torch.randint(0, nodes, (edges,), device=dev, generator=gen)
    dst = torch.randint(0, nodes, (edges,), device=dev, generator=gen)
    inv_deg = 1.0 / torch.bincount(dst, minlength=nodes).clamp(min=1).float()
    x = torch.randn(nodes, din, device=dev, generator=gen)
    y = torch.randint(0, classes, (nodes,), device=dev, generator=gen)
    model = M.GraphSAGE(din, hidden, classes, layers=3).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(x, src, dst, inv_deg), y), dev, amp=False))


def moe(dev: torch.device, tiny: bool) -> Built:
    vocab, d, heads, layers, ffn, experts, bs, seq = (
        (256, 64, 4, 1, 64, 4, 2, 32) if tiny else (32000, 1024, 16, 2, 2816, 8, 8, 1024))
    model = M.Llama(vocab, d, heads, layers, ffn, seq, experts=experts).to(dev, torch.bfloat16)
    idx = torch.randint(0, vocab, (bs, seq), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, _lm_loss(model, idx), dev, amp=False), "bf16 weights, top-2 of experts")


def _big_mlp(width: int, depth: int) -> nn.Sequential:
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.GELU())])


def tf32_mlp(dev: torch.device, tiny: bool) -> Built:
    """fp32 MLP trained with TF32 tensor-core matmuls (allow_tf32 set only around the step)."""
    width, depth, bs = (64, 2, 16) if tiny else (4096, 6, 8192)
    model = _big_mlp(width, depth).to(dev)
    x, y = torch.randn(bs, width, device=dev), torch.randn(bs, width, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    inner = _train_step(model, opt, lambda: F.mse_loss(model(x), y), dev, amp=False)

    def step() -> None:
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            inner()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    return Built(step)


FP8_MIN_CAPABILITY = (8, 9)  # _scaled_mm needs Ada/Hopper fp8 tensor cores
E4M3_MAX = 448.0  # largest finite float8_e4m3fn value


E5M2_MAX = 57344.0  # largest finite float8_e5m2 value (gradients: range over precision, as Transformer Engine's recipe)


def _fp8_quantize(t: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor scaling as in torchao's float8 recipes: scale so amax maps to the format's max (e4m3 for activations
    and weights, e5m2 for gradients); the tensor in FP8 and the inverse scale."""
    top = E4M3_MAX if dtype == torch.float8_e4m3fn else E5M2_MAX
    scale = top / t.abs().amax().float().clamp(min=1e-12)
    return (t.float() * scale).to(dtype), scale.reciprocal()


def fp8_mlp(dev: torch.device, tiny: bool) -> Built:
    """Inference of a big-linear MLP through torch._scaled_mm (fp8 e4m3 in, bf16 out); bf16 fallback below sm89."""
    width, depth, bs = (64, 2, 32) if tiny else (8192, 4, 8192)
    weights = [torch.randn(width, width, device=dev) / width ** 0.5 for _ in range(depth)]
    use_fp8 = dev.type == "cuda" and torch.cuda.get_device_capability(dev) >= FP8_MIN_CAPABILITY
    x0 = torch.randn(bs, width, device=dev, dtype=torch.bfloat16)
    if not use_fp8:
        wb = [w.to(torch.bfloat16) for w in weights]

        def step_bf16() -> None:
            with torch.no_grad():
                x = x0
                for w in wb:
                    x = F.gelu(x @ w.t())
        return Built(step_bf16, "fp8 unavailable here: bf16 matmuls")
    wq = [_fp8_quantize(w) for w in weights]  # (N, K) row-major, so .t() is the column-major B _scaled_mm wants

    def step() -> None:
        with torch.no_grad():
            x = x0
            for w8, w_scale in wq:
                x8, x_scale = _fp8_quantize(x)
                x = F.gelu(torch._scaled_mm(x8, w8.t(), scale_a=x_scale, scale_b=w_scale, out_dtype=torch.bfloat16))
    return Built(step, "fp8 e4m3 per-tensor scales, inference")


def _col_major(t: torch.Tensor) -> torch.Tensor:
    """The same matrix stored column-major, the layout torch._scaled_mm wants for its second operand."""
    return t.t().contiguous().t()


class _FP8Linear(torch.autograd.Function):
    """y = x W^T with every GEMM in FP8 through torch._scaled_mm (forward e4m3 x e4m3, the input gradient e5m2 x e4m3,
    the weight gradient e5m2 x e4m3 where the weight trains), bf16 out: the GEMMs of an FP8 training step."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        x2 = x.reshape(-1, x.shape[-1])
        (xq, xs), (wq, ws) = _fp8_quantize(x2), _fp8_quantize(w)
        y = torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16)
        ctx.save_for_backward(xq, xs, wq, ws)
        ctx.shape = x.shape
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:  # type: ignore[override]
        xq, xs, wq, ws = ctx.saved_tensors
        gq, gs = _fp8_quantize(gy.reshape(-1, gy.shape[-1]), torch.float8_e5m2)
        gx = torch._scaled_mm(gq, _col_major(wq), scale_a=gs, scale_b=ws, out_dtype=torch.bfloat16)
        gw = None
        if ctx.needs_input_grad[1]:
            gw = torch._scaled_mm(gq.t().contiguous(), _col_major(xq), scale_a=gs, scale_b=xs,
                                  out_dtype=torch.bfloat16)
        return gx.reshape(ctx.shape), gw


def _fp8_llm(dev: torch.device, tiny: bool, sizes: tuple[int, ...], note: str,
             trains: Callable[[str], bool] | None = None) -> Built:
    """_llm_step with the decoder layers' linears in FP8 (_FP8Linear) on sm89+; bf16 where FP8 is unavailable."""
    if dev.type != "cuda" or torch.cuda.get_device_capability(dev) < FP8_MIN_CAPABILITY:
        return _llm_step(dev, sizes, note + "; fp8 unavailable here: bf16 linears", trains)
    return _llm_step(dev, sizes, note, trains, fp8=True)


def gpt3_layers_fp8(dev: torch.device, tiny: bool) -> Built:
    """gpt3_layers with the decoder layers' GEMMs in FP8, as MLPerf's GPT-3 submissions run them."""
    return _fp8_llm(dev, tiny, GPT3_WIDE[tiny], "fp8 e4m3/e5m2 layer GEMMs, bf16 weights, AdamW; 2 of 96 layers")


def llama70b_lora_layers_fp8(dev: torch.device, tiny: bool) -> Built:
    """llama70b_lora_layers with the decoder layers' GEMMs in FP8, as MLPerf's Llama 2 70B LoRA submissions run them."""
    return _fp8_llm(dev, tiny, LLAMA70B_WIDE[tiny],
                    "fp8 e4m3/e5m2 layer GEMMs, base frozen (norms train); 2 of 80 layers", trains=_lora_trains)


def cudagraph_llama(dev: torch.device, tiny: bool) -> Built:
    """A whole training step (forward, backward, capturable AdamW) captured once and replayed as a CUDA graph."""
    vocab, d, heads, layers, ffn, bs, seq = (256, 64, 4, 1, 128, 2, 32) if tiny else (32000, 768, 12, 6, 2048, 8, 512)
    model = M.Llama(vocab, d, heads, layers, ffn, seq).to(dev, torch.bfloat16)
    idx = torch.randint(0, vocab, (bs, seq), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=dev.type == "cuda")
    eager = _train_step(model, opt, _lm_loss(model, idx), dev, amp=False)
    if dev.type != "cuda":
        return Built(eager, "no CUDA: eager step")
    # Warm up on a side stream (allocator, lazy optimizer state), as the CUDA-graphs docs prescribe.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            eager()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    # Capture on the current stream when it is not the legacy default one (a green-context stream under --sms).
    current = torch.cuda.current_stream()
    capture = current if current != torch.cuda.default_stream() else None
    with torch.cuda.graph(graph, stream=capture):
        loss = F.cross_entropy(model(idx).float().flatten(0, 1), idx.flatten())
        loss.backward()
        opt.step()
    return Built(graph.replay, "whole step captured")


def compiled_llama(dev: torch.device, tiny: bool) -> Built:
    """torch.compile (mode default) of a GPT-2-small-sized LLaMA decoder, fp32 weights under bf16 autocast."""
    vocab, d, heads, layers, ffn, bs, seq = (256, 64, 4, 1, 128, 2, 32) if tiny else (32000, 768, 12, 12, 2048, 8, 1024)
    model = M.Llama(vocab, d, heads, layers, ffn, seq).to(dev)
    # The CPU smoke test only checks that dynamo traces the model; inductor needs a C++ toolchain there.
    compiled = torch.compile(model, backend="eager" if dev.type != "cuda" else "inductor")
    idx = torch.randint(0, vocab, (bs, seq), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    note = "inductor" if dev.type == "cuda" else "dynamo with eager backend"
    return Built(_train_step(compiled, opt, _lm_loss(compiled, idx), dev, amp=True), note)


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("llama_d1024_l8_b4_s1024_bf16", llama, 20),
    Workload("vit_l16_b16_amp", vit_l16, 25),
    Workload("t5_d768_l6_b16_s256_amp", t5, 20),
    Workload("resnet152_b32_cl_amp", resnet152, 25),
    Workload("unet_c128_b16_64px_amp", unet, 20),
    Workload("graphsage_n200k_e2m_fp32", graphsage, 15),
    Workload("moe_top2_e8_d1024_b8_s1024_bf16", moe, 20),
    Workload("tf32_mlp_w4096_b8192", tf32_mlp, 15),
    Workload("fp8_mlp_w8192_b8192_infer", fp8_mlp, 15),
    Workload("cudagraph_llama_d768_b8_s512_bf16", cudagraph_llama, 20),
    Workload("compiled_llama_d768_b8_s1024_amp", compiled_llama, 90),
    Workload("gpt3_layers_d12288_l2_b1_s2048_bf16", gpt3_layers, 45),
    Workload("llama70b_lora_layers_d8192_l2_b1_s8192_bf16", llama70b_lora_layers, 45),
    Workload("unet_sd_c320_b8_64px_amp", unet_sd, 45),
    Workload("gpt3_layers_d12288_l2_b1_s2048_fp8", gpt3_layers_fp8, 45),
    Workload("llama70b_lora_layers_d8192_l2_b1_s8192_fp8", llama70b_lora_layers_fp8, 45),
]}

"""Model definitions for the collector, written with plain torch ops (no torch_geometric, no downloads).

Each class is a small, readable version of an architecture people train today; sizes are set by the
workload builders in ``workloads.py``, not here.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- LLaMA-style decoder
class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rope_tables(seq: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of rotary position embedding (Su et al. 2021), half-split layout as in LLaMA/HF."""
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    ang = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    return torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class Attention(nn.Module):
    """Causal multi-head attention with RoPE through SDPA (flash/cuDNN/efficient kernels on GPU)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.wqkv, self.wo = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.wqkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos[:t], sin[:t]), apply_rope(k, cos[:t], sin[:t])
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(a.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class DecoderBlock(nn.Module):
    def __init__(self, d: int, heads: int, ffn: nn.Module) -> None:
        super().__init__()
        self.n1, self.n2, self.attn, self.ffn = RMSNorm(d), RMSNorm(d), Attention(d, heads), ffn

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.n1(x), cos, sin)
        return x + self.ffn(self.n2(x))


class Llama(nn.Module):
    """Token embedding, pre-norm blocks (RMSNorm, RoPE attention, SwiGLU or MoE FFN), untied LM head."""

    def __init__(self, vocab: int, d: int, heads: int, layers: int, ffn_hidden: int, seq: int,
                 experts: int = 0) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)

        def ffn() -> nn.Module:
            return MoE(d, ffn_hidden, experts) if experts else SwiGLU(d, ffn_hidden)
        self.blocks = nn.ModuleList([DecoderBlock(d, heads, ffn()) for _ in range(layers)])
        self.norm, self.head = RMSNorm(d), nn.Linear(d, vocab, bias=False)
        cos, sin = rope_tables(seq, d // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        return self.head(self.norm(x))


# ---------------------------------------------------------------- mixture of experts
class MoE(nn.Module):
    """Top-k routed SwiGLU experts (Switch/Mixtral style), dispatched by index_select + index_add per expert.

    The per-expert ``torch.where`` synchronises with the host, as in the common eager implementations.
    """

    def __init__(self, d: int, hidden: int, experts: int, top_k: int = 2) -> None:
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList([SwiGLU(d, hidden) for _ in range(experts)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        probs = F.softmax(self.gate(flat).float(), dim=-1)
        weight, chosen = probs.topk(self.top_k, dim=-1)
        weight = (weight / weight.sum(-1, keepdim=True)).to(flat.dtype)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(chosen == e)
            if tok.numel() == 0:
                continue
            y = expert(flat.index_select(0, tok)) * weight[tok, slot].unsqueeze(-1)
            out = out.index_add(0, tok, y)
        return out.view_as(x)


# ---------------------------------------------------------------- T5-style encoder-decoder
class Seq2SeqTransformer(nn.Module):
    """Pre-norm encoder-decoder (T5 layout: shared embedding, tied LM head), built on nn.Transformer.

    Learned absolute positions stand in for T5's relative position bias.
    """

    def __init__(self, vocab: int, d: int, heads: int, layers: int, ffn: int, seq: int) -> None:
        super().__init__()
        self.d = d
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.core = nn.Transformer(d, heads, layers, layers, ffn, dropout=0.1, activation="gelu",
                                   batch_first=True, norm_first=True)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        def embed(ids: torch.Tensor) -> torch.Tensor:
            return self.emb(ids) * math.sqrt(self.d) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        h = self.core(embed(src), embed(tgt), tgt_mask=mask, tgt_is_causal=True)
        return F.linear(h, self.emb.weight)


# ---------------------------------------------------------------- diffusion UNet
def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal timestep embedding of DDPM (Ho et al. 2020)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    ang = t.float()[:, None] * freqs[None]
    return torch.cat([ang.cos(), ang.sin()], -1)


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, tdim: int) -> None:
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.c1(F.silu(self.n1(x))) + self.t(F.silu(emb))[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class SpatialAttention(nn.Module):
    def __init__(self, c: int, heads: int = 8) -> None:
        super().__init__()
        self.heads, self.norm = heads, nn.GroupNorm(32, c)
        self.qkv, self.proj = nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, 3, self.heads, c // self.heads, h * w).transpose(-1, -2).unbind(1)
        a = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj(a.transpose(-1, -2).reshape(b, c, h, w))


class Level(nn.Module):
    def __init__(self, cin: int, cout: int, tdim: int, attn: bool) -> None:
        super().__init__()
        self.res = ResBlock(cin, cout, tdim)
        self.attn = SpatialAttention(cout) if attn else nn.Identity()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        return self.attn(self.res(x, emb))


class UNet(nn.Module):
    """Latent-diffusion UNet: ResBlocks with timestep embedding, attention at the lowest levels, skip concat."""

    def __init__(self, c: int, mults: tuple[int, ...] = (1, 2, 4), cin: int = 4) -> None:
        super().__init__()
        self.c, tdim, chans = c, 4 * c, [c * m for m in mults]
        self.temb = nn.Sequential(nn.Linear(c, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.inp = nn.Conv2d(cin, c, 3, padding=1)
        last = len(chans) - 1
        self.down, prev = nn.ModuleList(), c
        for i, ch in enumerate(chans):
            self.down.append(Level(prev, ch, tdim, attn=i == last))
            prev = ch
        self.mid = Level(prev, prev, tdim, attn=True)
        self.up = nn.ModuleList()
        for i, ch in reversed(list(enumerate(chans))):
            self.up.append(Level(prev + ch, ch, tdim, attn=i == last))
            prev = ch
        self.out = nn.Sequential(nn.GroupNorm(32, prev), nn.SiLU(), nn.Conv2d(prev, cin, 3, padding=1))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        emb = self.temb(timestep_embedding(t, self.c))
        h, skips = self.inp(x), []
        for i, level in enumerate(self.down):
            h = level(h, emb)
            skips.append(h)
            if i < len(self.down) - 1:
                h = F.avg_pool2d(h, 2)
        h = self.mid(h, emb)
        for i, level in enumerate(self.up):
            h = level(torch.cat([h, skips.pop()], 1), emb)
            if i < len(self.up) - 1:
                h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        return self.out(h)


# ---------------------------------------------------------------- GraphSAGE
class GraphSAGE(nn.Module):
    """Full-graph GraphSAGE with mean aggregation (Hamilton et al. 2017) via index_select + index_add."""

    def __init__(self, din: int, hidden: int, classes: int, layers: int) -> None:
        super().__init__()
        dims = [din] + [hidden] * (layers - 1) + [classes]
        self.self_lin = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims, dims[1:])])
        self.neigh_lin = nn.ModuleList([nn.Linear(a, b, bias=False) for a, b in zip(dims, dims[1:])])

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, inv_deg: torch.Tensor) -> torch.Tensor:
        for i, (ls, ln) in enumerate(zip(self.self_lin, self.neigh_lin)):
            agg = torch.zeros_like(x).index_add(0, dst, x.index_select(0, src)) * inv_deg[:, None]
            x = ls(x) + ln(agg)
            if i < len(self.self_lin) - 1:
                x = F.relu(x)
        return x

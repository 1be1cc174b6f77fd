"""Launch-bound workloads for launch_bound.py (issue 35): steps whose host, not the GPU, sets the pace on an H100.

None is in the overhead calibration, the dev sets or the earlier held-out sets. SET_A was recorded first (run 1);
SET_B, recorded on another machine after the range's method was fixed, holds other workloads (and the issue's MLP
again) and is the clean held-out set. A builder takes the device and ``tiny`` (CPU smoke sizes) and returns a
``Built`` (workloads.py).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import Built, SkipWorkload, Workload, _torchvision_models, _train_step


def _mlp(width: int, depth: int) -> nn.Sequential:
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])


def mlp_bf16(dev: torch.device, tiny: bool) -> Built:
    """The issue's case: 4 x Linear(4096) + ReLU, batch 512, bf16 weights, Adam."""
    w, b = (64, 8) if tiny else (4096, 512)
    model = _mlp(w, 4).to(dev, torch.bfloat16)
    x, y = torch.randn(b, w, device=dev, dtype=torch.bfloat16), torch.randn(b, w, device=dev, dtype=torch.bfloat16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.mse_loss(model(x), y), dev, amp=False), "bf16 weights, Adam")


def mlp_amp(dev: torch.device, tiny: bool) -> Built:
    """The same MLP in fp32 weights under bf16 autocast."""
    w, b = (64, 8) if tiny else (4096, 512)
    model = _mlp(w, 4).to(dev)
    x, y = torch.randn(b, w, device=dev), torch.randn(b, w, device=dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.mse_loss(model(x).float(), y), dev, amp=True), "bf16 autocast, Adam")


def mlp_small(dev: torch.device, tiny: bool) -> Built:
    """6 x Linear(1024), batch 64, fp32, AdamW (foreach)."""
    w = 64 if tiny else 1024
    model = _mlp(w, 6).to(dev)
    x, y = torch.randn(64, w, device=dev), torch.randn(64, w, device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.mse_loss(model(x), y), dev, amp=False))


def mlp_tiny_sgd(dev: torch.device, tiny: bool) -> Built:
    """3 x Linear(256), batch 16, SGD with momentum: almost no host work per step."""
    model = _mlp(64 if tiny else 256, 3).to(dev)
    x, y = torch.randn(16, 64 if tiny else 256, device=dev), torch.randn(16, 64 if tiny else 256, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    return Built(_train_step(model, opt, lambda: F.mse_loss(model(x), y), dev, amp=False))


class Block(nn.Module):
    """Pre-norm decoder block with a KV cache (F.scaled_dot_product_attention), for the hand-written decode loop."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.ln1, self.ln2 = heads, nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, cache: list[torch.Tensor]) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        if cache:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        cache[:] = [k, v]
        a = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.ff(self.ln2(x))


def decode_loop(dev: torch.device, tiny: bool) -> Built:
    """Hand-written GPT decoder (d 512, 4 layers, bf16): prefill 64 tokens, 16 greedy KV-cache steps, batch 1."""
    d, layers, vocab, new = (64, 2, 256, 4) if tiny else (512, 4, 32000, 16)
    emb, head = nn.Embedding(vocab, d).to(dev, torch.bfloat16), nn.Linear(d, vocab).to(dev, torch.bfloat16)
    blocks = [Block(d, 8).to(dev, torch.bfloat16).eval() for _ in range(layers)]
    prompt = torch.randint(0, vocab, (1, 16 if tiny else 64), device=dev)

    def step() -> None:
        with torch.no_grad():
            caches: list[list[torch.Tensor]] = [[] for _ in blocks]
            tok = prompt
            for _ in range(new + 1):
                x = emb(tok)
                for blk, c in zip(blocks, caches):
                    x = blk(x, c)
                tok = head(x[:, -1:]).argmax(-1)
    return Built(step, f"{new} tokens")


def hf_generate(dev: torch.device, tiny: bool) -> Built:
    """Hugging Face ``generate`` (greedy, 16 new tokens, its per-token host syncs) on a small Qwen2, bf16."""
    try:
        import transformers as tr
    except ImportError as exc:
        raise SkipWorkload(f"transformers not importable ({exc})") from exc
    cfg = tr.Qwen2Config(hidden_size=64 if tiny else 512, intermediate_size=128 if tiny else 1408,
                         num_hidden_layers=2 if tiny else 4, num_attention_heads=4 if tiny else 8,
                         num_key_value_heads=4 if tiny else 8, vocab_size=256 if tiny else 32000)
    model = tr.Qwen2ForCausalLM(cfg).to(dev, torch.bfloat16).eval()
    prompt = torch.randint(0, cfg.vocab_size, (2, 64), device=dev)
    new = 4 if tiny else 16

    def step() -> None:
        with torch.no_grad():
            model.generate(prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
    return Built(step, f"Qwen2 d512 l4, {new} tokens")


def resmlp_loop_optim(dev: torch.device, tiny: bool) -> Built:
    """24 residual (LayerNorm, Linear(256)) blocks, batch 32; AdamW(foreach=False), clip_grad_norm_(foreach=False):
    the optimizer's per-parameter Python loop dominates the host."""
    w, depth = (32, 3) if tiny else (256, 24)
    model = nn.Sequential(*[nn.Sequential(nn.LayerNorm(w), nn.Linear(w, w)) for _ in range(depth)]).to(dev)
    x, y = torch.randn(32, w, device=dev), torch.randn(32, w, device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
        opt.step()
    return Built(step)


def convnet_ema(dev: torch.device, tiny: bool) -> Built:
    """Small CNN (4 conv + BatchNorm), batch 32 x 32 px, RMSprop(foreach=False) and an EMA of the weights in a
    Python loop (as diffusion training keeps one)."""
    c = 8 if tiny else 64
    layers: list[nn.Module] = []
    for i in range(4):
        layers += [nn.Conv2d(3 if i == 0 else c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU()]
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10)).to(dev)
    ema = [p.detach().clone() for p in model.parameters()]
    x, y = torch.randn(32, 3, 32, 32, device=dev), torch.randint(0, 10, (32,), device=dev)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-4, foreach=False)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        with torch.no_grad():
            for e, p in zip(ema, model.parameters()):
                e.mul_(0.999).add_(p, alpha=0.001)
    return Built(step)


def lstmcell_loop(dev: torch.device, tiny: bool) -> Built:
    """nn.LSTMCell(256) unrolled over 64 steps in Python, batch 16, Adam."""
    d, steps = (16, 4) if tiny else (256, 64)
    cell, out = nn.LSTMCell(d, d).to(dev), nn.Linear(d, 1).to(dev)
    x, y = torch.randn(steps, 16, d, device=dev), torch.randn(16, 1, device=dev)
    opt = torch.optim.Adam(list(cell.parameters()) + list(out.parameters()), lr=1e-3)

    def loss() -> torch.Tensor:
        h = c = torch.zeros(16, d, device=dev)
        for t in range(steps):
            h, c = cell(x[t], (h, c))
        return F.mse_loss(out(h), y)
    return Built(_train_step(cell, opt, loss, dev, amp=False))


def small_encoder(dev: torch.device, tiny: bool) -> Built:
    """nn.TransformerEncoder (d 256, 4 layers, 4 heads), batch 8 x 64, bf16 autocast, AdamW."""
    d = 32 if tiny else 256
    layer = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, 2 if tiny else 4, enable_nested_tensor=False),
                          nn.Linear(d, 10)).to(dev)
    x, y = torch.randn(8, 64, d, device=dev), torch.randint(0, 10, (8,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(x).mean(1).float(), y), dev, amp=True))


# ---------------------------------------------------------------- set B
def gru_decode(dev: torch.device, tiny: bool) -> Built:
    """Seq2seq-style greedy decoder: embedding, nn.GRUCell(512), output projection, 48 steps, batch 4, fp32."""
    vocab, d, steps = (64, 16, 4) if tiny else (8000, 512, 48)
    emb, cell, out = nn.Embedding(vocab, d).to(dev), nn.GRUCell(d, d).to(dev), nn.Linear(d, vocab).to(dev)
    h0, tok0 = torch.zeros(4, d, device=dev), torch.zeros(4, dtype=torch.long, device=dev)

    def step() -> None:
        with torch.no_grad():
            h, tok = h0, tok0
            for _ in range(steps):
                h = cell(emb(tok), h)
                tok = out(h).argmax(-1)
    return Built(step)


def resnet18_small(dev: torch.device, tiny: bool) -> Built:
    """torchvision ResNet-18, batch 16 x 128 px, bf16 autocast, channels-last, SGD with momentum."""
    try:
        model = _torchvision_models().resnet18(num_classes=10)
    except RuntimeError as exc:  # a torchvision built for another torch
        raise SkipWorkload(f"torchvision unusable ({exc})") from exc
    model = model.to(dev, memory_format=torch.channels_last)
    res = 32 if tiny else 128
    x = torch.randn(2 if tiny else 16, 3, res, res, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (x.shape[0],), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(x), y), dev, amp=True))


def hf_bert_small(dev: torch.device, tiny: bool) -> Built:
    """Hugging Face BertForSequenceClassification (d 256, 4 layers), batch 8 x 128, bf16 autocast, AdamW."""
    try:
        import transformers as tr
    except ImportError as exc:
        raise SkipWorkload(f"transformers not importable ({exc})") from exc
    cfg = tr.BertConfig(hidden_size=64 if tiny else 256, num_hidden_layers=2 if tiny else 4, num_attention_heads=4,
                        intermediate_size=128 if tiny else 1024, vocab_size=256 if tiny else 30522)
    model = tr.BertForSequenceClassification(cfg).to(dev)
    idx = torch.randint(0, cfg.vocab_size, (8, 128), device=dev)
    y = torch.randint(0, 2, (8,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: model(idx, labels=y).loss, dev, amp=True))


def embedding_bags(dev: torch.device, tiny: bool) -> Built:
    """Recommender-style: 8 EmbeddingBag(20k, 64) tables summed per sample + a 3-layer MLP, batch 512,
    Adagrad(foreach=False)."""
    rows, bags, dim = (100, 2, 8) if tiny else (20000, 8, 64)
    tables = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(bags)).to(dev)
    top = nn.Sequential(nn.Linear(bags * dim, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 1)).to(dev)
    idx = [torch.randint(0, rows, (512, 20), device=dev) for _ in range(bags)]
    y = torch.rand(512, 1, device=dev)
    opt = torch.optim.Adagrad(list(tables.parameters()) + list(top.parameters()), lr=1e-2, foreach=False)

    def loss() -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(top(torch.cat([t(i) for t, i in zip(tables, idx)], 1)), y)
    return Built(_train_step(top, opt, loss, dev, amp=False))


def accumulate_fp16(dev: torch.device, tiny: bool) -> Built:
    """Gradient accumulation: a small CNN, 4 micro-batches of 8 x 32 px per step, fp16 autocast with a GradScaler
    (its inf check reads back to the host every step), SGD."""
    c = 8 if tiny else 64
    model = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10)).to(dev)
    xs = [torch.randn(8, 3, 32, 32, device=dev) for _ in range(4)]
    ys = [torch.randint(0, 10, (8,), device=dev) for _ in range(4)]
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    scaler = torch.amp.GradScaler(dev.type, enabled=dev.type == "cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for x, y in zip(xs, ys):
            with torch.autocast(dev.type, dtype=torch.float16, enabled=dev.type == "cuda"):
                loss = F.cross_entropy(model(x), y) / len(xs)
            scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return Built(step)


def timm_vit_tiny(dev: torch.device, tiny: bool) -> Built:
    """timm vit_tiny_patch16_224, batch 8, bf16 autocast, AdamW."""
    try:
        import timm
    except ImportError as exc:
        raise SkipWorkload(f"timm not importable ({exc})") from exc
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32 if tiny else 224).to(dev)
    x = torch.randn(2 if tiny else 8, 3, 32 if tiny else 224, 32 if tiny else 224, device=dev)
    y = torch.randint(0, 1000, (x.shape[0],), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(x), y), dev, amp=True))


def decode_manual_fp16(dev: torch.device, tiny: bool) -> Built:
    """Decoder with hand-written attention (matmul, softmax) and a KV cache, d 384, 3 layers, fp16: prefill 32
    tokens, 24 greedy steps, batch 8."""
    d, layers, vocab, new = (64, 1, 256, 3) if tiny else (384, 3, 16000, 24)
    heads = 4 if tiny else 6
    dt = torch.float16 if dev.type == "cuda" else torch.float32
    emb, head = nn.Embedding(vocab, d).to(dev, dt), nn.Linear(d, vocab).to(dev, dt)
    qkv = [nn.Linear(d, 3 * d).to(dev, dt) for _ in range(layers)]
    ff = [nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)).to(dev, dt) for _ in range(layers)]
    prompt = torch.randint(0, vocab, (8, 32), device=dev)

    def attend(x: torch.Tensor, i: int, cache: list[torch.Tensor]) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = qkv[i](x).view(b, t, 3, heads, d // heads).transpose(1, 3).unbind(2)
        if cache:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        cache[:] = [k, v]
        w = (q @ k.transpose(-1, -2)) / (d // heads) ** 0.5
        if t > 1:
            w = w.masked_fill(torch.ones(t, t, device=dev, dtype=torch.bool).triu(1), float("-inf"))
        return x + (w.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)

    def step() -> None:
        with torch.no_grad():
            caches: list[list[torch.Tensor]] = [[] for _ in range(layers)]
            tok = prompt
            for _ in range(new + 1):
                x = emb(tok)
                for i in range(layers):
                    x = attend(x, i, caches[i])
                    x = x + ff[i](x)
                tok = head(x[:, -1:]).argmax(-1)
    return Built(step)


def lbfgs_mlp(dev: torch.device, tiny: bool) -> Built:
    """L-BFGS (max_iter 5, history 10) on a 3 x Linear(512) MLP, batch 128: closure re-evaluations and the
    optimizer's host-side scalar tests (syncs) every step."""
    w = 32 if tiny else 512
    model = _mlp(w, 3).to(dev)
    x, y = torch.randn(128, w, device=dev), torch.randn(128, w, device=dev)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=5, history_size=10)

    def closure() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    def step() -> None:
        opt.step(closure)
    return Built(step)


SET_A: dict[str, Workload] = {w.name: w for w in [
    Workload("mlp4_w4096_b512_bf16", mlp_bf16, 12), Workload("mlp4_w4096_b512_amp", mlp_amp, 12),
    Workload("mlp6_w1024_b64_adamw", mlp_small, 10), Workload("mlp3_w256_b16_sgd", mlp_tiny_sgd, 10),
    Workload("decode_d512_l4_t16_bf16", decode_loop, 25), Workload("hf_qwen2_generate16_b2", hf_generate, 30),
    Workload("resmlp24_w256_adamw_loop", resmlp_loop_optim, 15), Workload("convnet_rmsprop_ema", convnet_ema, 12),
    Workload("lstmcell64_b16", lstmcell_loop, 15), Workload("encoder_d256_l4_b8_amp", small_encoder, 12),
]}
SET_B: dict[str, Workload] = {w.name: w for w in [
    Workload("mlp4_w4096_b512_bf16", mlp_bf16, 12), Workload("mlp4_w4096_b512_amp", mlp_amp, 12),
    Workload("gru_decode48_b4", gru_decode, 15), Workload("resnet18_b16_128px_amp", resnet18_small, 15),
    Workload("hf_bert_d256_l4_b8_amp", hf_bert_small, 20), Workload("embbag8_b512_adagrad_loop", embedding_bags, 12),
    Workload("cnn_accum4_fp16_scaler", accumulate_fp16, 12), Workload("timm_vit_tiny_b8_amp", timm_vit_tiny, 20),
    Workload("decode_manual_d384_l3_b8_t24_fp16", decode_manual_fp16, 20), Workload("lbfgs_mlp3_w512", lbfgs_mlp, 12),
]}
SETS = {"A": SET_A, "B": SET_B}

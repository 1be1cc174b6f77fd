"""Train the FP32 GEMM time-ratio MLP on the NeuSight data and write habitat_trace/scale/learned/gemm_fp32.npz.

    python benchmarks/learned/train_gemm.py [--data ../shared/data/neusight] [--out PATH] [--exclude GPU]

Target: log2(t_target / t_origin) minus log2 of the peak-FP32 ratio (the network learns the correction);
loss: L1 in log2 space (we report the median error). Deterministic: seeded, one thread, fixed batch order.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from habitat_trace.scale.learned import data as D  # noqa: E402
from habitat_trace.scale.learned import model as M  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "neusight"
HIDDEN = (64, 64)
EPOCHS = 12
BATCH = 2048
LR = 3e-3
WEIGHT_DECAY = 1e-4
SEED = 0


def xy(p) -> tuple[np.ndarray, np.ndarray]:
    """Features and the log2 correction target of a ``data.pairs`` table."""
    cat = load_catalog()
    vec = {g: M.gpu_vector(cat.resolve(g)) for g in set(p.origin) | set(p.target)}
    o = np.stack([vec[g] for g in p.origin])
    t = np.stack([vec[g] for g in p.target])
    x = M.features(p.b, p.m, p.n, p.k, p.t_origin_ms, o, t)
    y = np.log2(p.t_target_ms.to_numpy() / p.t_origin_ms.to_numpy()) - M.baseline_log2_ratio(x)
    return x, y


def train(x: np.ndarray, y: np.ndarray, hidden=HIDDEN, epochs=EPOCHS, seed=SEED) -> dict[str, np.ndarray]:
    """Fit the MLP; returns the arrays model.load() reads."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-6
    xt = torch.tensor((x - mean) / std, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    sizes = (x.shape[1], *hidden, 1)
    layers: list[torch.nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.SiLU())
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(net.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    steps = epochs * (len(xt) // BATCH + 1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=steps)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(BATCH):
            loss = (net(xt[idx])[:, 0] - yt[idx]).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    linear = [m for m in net if isinstance(m, torch.nn.Linear)]
    out = {"mean": mean, "std": std, "n_layers": np.array(len(linear)), "features": np.array(M.FEATURES)}
    for i, lin in enumerate(linear):
        out[f"w{i}"] = lin.weight.detach().double().numpy().T.copy()
        out[f"b{i}"] = lin.bias.detach().double().numpy().copy()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=M.WEIGHTS)
    ap.add_argument("--exclude", action="append", default=[], help="catalog GPU name to leave out")
    a = ap.parse_args()
    wide = D.joined(D.load_neusight(a.data))
    gpus = [g for g in D.gpus(wide) if g not in a.exclude]
    # keep a fixed 10% of shapes out of training: the held-out slice tests/test_learned.py checks
    holdout = held_out_shapes(wide)
    p = D.pairs(wide[~holdout], gpus, gpus)
    x, y = xy(p)
    arrays = train(x, y)
    arrays["meta"] = np.array(f"NeuSight FP32 bmm+linear, GPUs {', '.join(gpus)}; {len(p)} pairs; "
                              f"MLP {HIDDEN}, {EPOCHS} epochs, seed {SEED}; held-out shapes: hash % 10 == 0")
    np.savez_compressed(a.out, **arrays)
    print(f"wrote {a.out} ({a.out.stat().st_size} bytes) from {len(p)} pairs")


def held_out_shapes(wide) -> np.ndarray:
    """Deterministic 10% of shapes, by a hash of (op, B, M, N, K)."""
    key = wide.op.map({"bmm": 1, "linear": 2}).to_numpy() * 1_000_003
    h = (key + wide.b.to_numpy() * 7919 + wide.m.to_numpy() * 104729 + wide.n.to_numpy() * 1299709
         + wide.k.to_numpy() * 15485863) % 10
    return h == 0


if __name__ == "__main__":
    main()

"""Train the FP32 GEMM time-ratio MLP on the NeuSight data and write habitat_trace/scale/learned/gemm_fp32.npz.

    python benchmarks/learned/train_gemm.py [--data ../shared/data/neusight] [--out PATH] [--exclude GPU]

Target: log2(t_target / t_origin) minus the physics baseline (peak x TDP-limited clock, model.baseline_log2_ratio):
the networks learn the correction; loss: L1 in log2 space (we report the median error). An ensemble of SEEDS
networks, their corrections averaged. Deterministic: seeded, one thread, fixed batch order.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from training import data as D  # noqa: E402
from habitat_trace.scale.learned import model as M  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "neusight"
HIDDEN = (64, 64)
EPOCHS = 12
BATCH = 2048
LR = 3e-3
WEIGHT_DECAY = 1e-4
SEEDS = (0, 1, 2, 3, 4)  # the ensemble; the mean of 3-5 seeds moved leave-one-GPU-out medians by < 1 point


def xy(p) -> tuple[np.ndarray, np.ndarray]:
    """Features and the log2 correction target of a ``data.pairs`` table."""
    cat = load_catalog()
    vec = {g: M.gpu_vector(cat.resolve(g)) for g in set(p.origin) | set(p.target)}
    o = np.stack([vec[g] for g in p.origin])
    t = np.stack([vec[g] for g in p.target])
    x = M.features(p.b, p.m, p.n, p.k, p.t_origin_ms, o, t)
    y = np.log2(p.t_target_ms.to_numpy() / p.t_origin_ms.to_numpy()) - M.baseline_log2_ratio(p.t_origin_ms, o, t)
    return x, y


def train(x: np.ndarray, y: np.ndarray, seeds=SEEDS, hidden=HIDDEN, epochs=EPOCHS) -> dict[str, np.ndarray]:
    """Fit one MLP per seed on the same normalized inputs; returns the arrays model.load() reads."""
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-6
    out = {"mean": mean, "std": std, "n_members": np.array(len(seeds)), "features": np.array(M.FEATURES)}
    for e, seed in enumerate(seeds):
        layers = _fit_one((x - mean) / std, y, hidden, epochs, seed)
        out["n_layers"] = np.array(len(layers) // 2)
        out.update({f"m{e}_{'wb'[i % 2]}{i // 2}": a for i, a in enumerate(layers)})
    return out


def ensemble(arrays: dict[str, np.ndarray], meta: str = "") -> M.Ensemble:
    """The in-memory model of ``train``'s arrays (what model.load() returns for the saved file)."""
    n_layers, n_members = int(arrays["n_layers"]), int(arrays["n_members"])
    members = tuple(tuple(arrays[f"m{e}_{p}{i}"] for i in range(n_layers) for p in ("w", "b"))
                    for e in range(n_members))
    return M.Ensemble(arrays["mean"], arrays["std"], members, meta)


def _fit_one(xn: np.ndarray, y: np.ndarray, hidden, epochs: int, seed: int) -> list[np.ndarray]:
    """One MLP on normalized inputs; returns [W0, b0, W1, b1, ...] as float64 (W: in x out)."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    xt = torch.tensor(xn, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    sizes = (xn.shape[1], *hidden, 1)
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
    out = []
    for lin in (m for m in net if isinstance(m, torch.nn.Linear)):
        out += [lin.weight.detach().double().numpy().T.copy(), lin.bias.detach().double().numpy().copy()]
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
                              f"{len(SEEDS)} MLPs {HIDDEN}, {EPOCHS} epochs, seeds {SEEDS}; "
                              "held-out shapes: hash % 10 == 0")
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

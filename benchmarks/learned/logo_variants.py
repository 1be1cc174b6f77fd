"""Variants of the leave-one-GPU-out study (eval_logo.py) and the bounds that say how far the NeuSight data can
take a ratio model: what benchmarks/learned/logo_notes.md reports under "2026-11-23". Writes nothing but stdout.

    python benchmarks/learned/logo_variants.py VARIANT [VARIANT ...] [--seeds 2] [--data ../shared/data/neusight]

Variants (each prints the held-out GPUs' medians, then the overall one):
  shipped       the shipped inputs and loss (model.features, L1 in log2): the reference
  loss=K:S      fine-tune the L1 fit for 6 epochs with a mode-seeking loss K (welsch, cauchy, band) of scale S
                (log2 units): the median asks for most errors inside a band, not for the conditional median
  +tiles        add wave efficiency (tiles / ceil(tiles / slots)) on both GPUs for seven cuBLAS SGEMM tiles
  +op           add bmm-vs-linear (nn vs tn layout: each GPU picks other kernel families for them)
  +otile        add the origin kernel's tile (from its name), its tile waves and padding efficiency: the engine
                has the origin's kernel name, so this one would be usable in scale
  +ttile        add the same for the *held-out* GPU's own kernel: an oracle (its kernel choice is unknown in
                practice) that bounds what modelling cuBLAS's kernel selection could gain
  +oid          add a one-hot of the origin GPU (its quirks are in the training rows; the target's are not)
  +hopper       add pairs among our H100/H200 FP32 microbenchmarks (benchmarks/results/gemm, full SMs only)
  +hoppersm     the same with the green-context runs (H100 at 100/64/48 SMs, H200 at 64) as more "GPUs"
  direct        no origin time: log2(t / roofline) of each GPU from the GEMM's dims, FLOPs, bytes, intensity,
                128x128-tile waves and the GPU's specs (SMs, peak, bandwidth, sustained clock), trained on the
                other four GPUs' own times (issue 6: "as a ratio ..., or directly where that is better")
  insample      train on all five GPUs and score each on itself: the model family's in-sample floor
  drop          for each held-out GPU, also train without one more GPU: does a fifth GPU help?
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_gemm as T  # noqa: E402
from training import data as D  # noqa: E402
from habitat_trace.scale.learned import model as M  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402

# (tile M, tile N, resident blocks per SM) of the cuBLAS SGEMM kernels in the NeuSight data (their names)
SGEMM_TILES = ((32, 32, 8), (64, 32, 4), (64, 64, 4), (128, 32, 4), (128, 64, 2), (128, 128, 1), (256, 128, 1))
HOPPER_FILES = {"H100": "gemm_NVIDIA_H100_80GB_HBM3.csv.gz", "H200": "gemm_NVIDIA_H200.csv.gz"}
HOPPER_SM_FILES = {f"H100-SM{n}": f"gemm_NVIDIA_H100_80GB_HBM3_sm{n}.csv.gz" for n in (100, 64, 48)}
HOPPER_SM_FILES["H200-SM64"] = "gemm_NVIDIA_H200_sm64.csv.gz"
SM_SPECS = ROOT / "benchmarks" / "specs_sm_limited.toml"
FINE_TUNE_EPOCHS = 6


class Study:
    def __init__(self, data: Path, seeds: int):
        self.long = D.load_neusight(data)
        self.wide = D.joined(self.long)
        self.gpus = D.gpus(self.wide)
        self.seeds = tuple(range(seeds))
        self.cat = load_catalog()
        self.vec = {g: M.gpu_vector(self.cat.resolve(g)) for g in self.gpus}
        tile = self.long.kernel.str.extract(r"(\d+)x(\d+)").astype(float)
        tiles = self.long.assign(tm=tile[0], tn=tile[1]).pivot_table(index=D.SHAPE, columns="gpu",
                                                                     values=["tm", "tn"], aggfunc="first")
        tiles.columns = [f"{v}[{g}]" for v, g in tiles.columns]
        self.tiles = tiles.fillna(128.0).reset_index()  # the few kernels without a tile in their name: 128x128

    def xy(self, p: pd.DataFrame, extras: set[str]) -> tuple[np.ndarray, np.ndarray]:
        o, t = np.stack([self.vec[g] for g in p.origin]), np.stack([self.vec[g] for g in p.target])
        x = M.features(p.b, p.m, p.n, p.k, p.t_origin_ms, o, t)
        b, m, n = (p[c].to_numpy(float) for c in ("b", "m", "n"))
        cols = []
        if "tiles" in extras:
            for tm, tn, occ in SGEMM_TILES:
                tiles = b * np.ceil(m / tm) * np.ceil(n / tn)
                for g in (t, o):
                    w = tiles / (g[:, 0] * occ)
                    cols.append(w / np.maximum(np.ceil(w), 1))
        if "oid" in extras:
            cols += [(p.origin.to_numpy() == g).astype(float) for g in self.gpus]
        if "op" in extras:
            cols.append((p.op.to_numpy() == "bmm").astype(float))
        for side, names, g in (("otile", p.origin, o), ("ttile", p.target, t)):
            if side not in extras:
                continue
            tl = p[D.SHAPE].merge(self.tiles, on=D.SHAPE, how="left")
            code = pd.Categorical(names, categories=self.gpus).codes
            tm = np.choose(code, [tl[f"tm[{x}]"].to_numpy() for x in self.gpus])
            tn = np.choose(code, [tl[f"tn[{x}]"].to_numpy() for x in self.gpus])
            pad_m, pad_n = np.ceil(m / tm) * tm, np.ceil(n / tn) * tn
            cols += [np.log2(tm), np.log2(tn), np.log2(b * pad_m / tm * pad_n / tn / g[:, 0]),
                     np.log2(m * n / (pad_m * pad_n))]
        if cols:
            x = np.c_[x, np.stack(cols, -1)]
        y = np.log2(p.t_target_ms.to_numpy() / p.t_origin_ms.to_numpy()) - M.baseline_log2_ratio(p.t_origin_ms, o, t)
        return x, y

    def fit_predict(self, train: pd.DataFrame, test: pd.DataFrame, extras: set[str], loss: str | None,
                    extra_xy=None) -> np.ndarray:
        x, y = self.xy(train, extras)
        if extra_xy is not None:
            x, y = np.r_[x, extra_xy[0]], np.r_[y, extra_xy[1]]
        mean, std = x.mean(axis=0), x.std(axis=0) + 1e-6
        xt, _ = self.xy(test, extras)
        corr = np.mean([_predict(_fit((x - mean) / std, y, s, loss), (xt - mean) / std) for s in self.seeds], 0)
        o, t = np.stack([self.vec[g] for g in test.origin]), np.stack([self.vec[g] for g in test.target])
        t_o = test.t_origin_ms.to_numpy()
        flops, nbytes = M.gemm_cost(test.b, test.m, test.n, test.k)
        return np.maximum(t_o * np.exp2(M.baseline_log2_ratio(t_o, o, t) + corr), M.roofline_ms(flops, nbytes, t))

    def hopper_xy(self, extras: set[str], with_sm_limits: bool):
        """Features/targets of every ordered pair among our H100/H200 FP32 microbenchmarks (full SMs, and the
        green-context runs when ``with_sm_limits``)."""
        frames = []
        cat = load_catalog(SM_SPECS)
        files = {**HOPPER_FILES, **(HOPPER_SM_FILES if with_sm_limits else {})}
        for name, f in files.items():
            d = pd.read_csv(ROOT / "benchmarks" / "results" / "gemm" / f)
            d = d[d.DType == "fp32"].rename(columns={"OPName": "op", "B": "b", "M": "m", "N": "n", "K": "k",
                                                     "Latency": "t_ms"})
            frames.append(d[D.SHAPE + ["t_ms"]].assign(gpu=cat.resolve(name).name))
        wide = pd.concat(frames).pivot_table(index=D.SHAPE, columns="gpu", values="t_ms", aggfunc="first").dropna()
        gpus = list(wide.columns)
        wide.columns = [f"t_ms[{g}]" for g in gpus]
        wide = wide.reset_index()
        for g in gpus:
            self.vec[g] = M.gpu_vector(cat.resolve(g))
            wide[f"blocks[{g}]"] = wide[f"threads[{g}]"] = 0
        return self.xy(D.pairs(wide, gpus, gpus), extras - {"otile", "ttile", "oid"})


def direct_xy(study: Study, gpus: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Rows (shape, GPU) of ``gpus``: inputs of the direct model and log2(t / roofline)."""
    w = study.wide
    xs, ys = [], []
    for g in gpus:
        v = np.broadcast_to(study.vec[g], (len(w), len(M.GPU_FIELDS)))
        b, m, n, k = (w[c].to_numpy(float) for c in ("b", "m", "n", "k"))
        flops, nbytes = M.gemm_cost(b, m, n, k)
        roof = M.roofline_ms(flops, nbytes, v)
        waves = b * np.ceil(m / M.TILE) * np.ceil(n / M.TILE) / v[:, 0]
        xs.append(np.stack([np.log2(b), np.log2(m), np.log2(n), np.log2(k), np.log2(flops), np.log2(nbytes),
                            np.log2(flops / nbytes), np.log2(waves), np.log2(np.maximum(np.ceil(waves), 1)),
                            np.log2(v[:, 0]), np.log2(v[:, 1]), np.log2(v[:, 2]), np.log2(M.sustained_fraction(v)),
                            np.log2(roof)], -1))
        ys.append(np.log2(w[f"t_ms[{g}]"].to_numpy() / roof))
    return np.concatenate(xs), np.concatenate(ys)


def _fit(xn: np.ndarray, y: np.ndarray, seed: int, loss: str | None):
    """train_gemm's MLP (same sizes, epochs, optimizer), then optionally fine-tuned with a mode-seeking loss."""
    import torch

    layers = T._fit_one(xn, y, T.HIDDEN, T.EPOCHS, seed)
    if loss is None:
        return layers
    kind, scale = loss.split(":")
    scale = float(scale)
    robust = {"welsch": lambda r: 1 - torch.exp(-0.5 * (r / scale) ** 2),
              "cauchy": lambda r: torch.log1p((r / scale) ** 2),
              "band": lambda r: torch.sigmoid((r.abs() - scale) / 0.03)}[kind]
    torch.manual_seed(seed)
    params = [torch.tensor(a.T.copy() if a.ndim == 2 else a, dtype=torch.float32, requires_grad=True) for a in layers]
    xt, yt = torch.tensor(xn, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    opt = torch.optim.AdamW(params, lr=T.LR / 3, weight_decay=T.WEIGHT_DECAY)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(FINE_TUNE_EPOCHS):
        for idx in torch.randperm(len(xt), generator=gen).split(T.BATCH):
            h = xt[idx]
            for i in range(0, len(params) - 2, 2):
                h = torch.nn.functional.silu(h @ params[i].T + params[i + 1])
            loss_v = robust(h @ params[-2].T[:, 0] + params[-1][0] - yt[idx]).mean()
            opt.zero_grad()
            loss_v.backward()
            opt.step()
    return [p.detach().double().numpy().T.copy() if p.ndim == 2 else p.detach().double().numpy() for p in params]


def _predict(layers: list[np.ndarray], xn: np.ndarray) -> np.ndarray:
    return M.Ensemble(np.zeros(xn.shape[1]), np.ones(xn.shape[1]), (tuple(layers),), "").log2_correction(xn)


def median_err(pred: np.ndarray, p: pd.DataFrame) -> float:
    return float(np.median(np.abs(pred / p.t_target_ms.to_numpy() - 1)))


def run(study: Study, variant: str) -> None:
    extras = {v[1:] for v in variant.split(",") if v.startswith("+")}
    loss = next((v[5:] for v in variant.split(",") if v.startswith("loss=")), None)
    hopper = study.hopper_xy(extras, "hoppersm" in extras) if extras & {"hopper", "hoppersm"} else None
    errs = []
    for held in study.gpus:
        rest = [g for g in study.gpus if g != held]
        if variant == "direct":
            x, y = direct_xy(study, rest)
            xt, yt = direct_xy(study, [held])
            mean, std = x.mean(axis=0), x.std(axis=0) + 1e-6
            corr = np.mean([_predict(_fit((x - mean) / std, y, s, None), (xt - mean) / std) for s in study.seeds], 0)
            errs.append(np.abs(np.exp2(corr - yt) - 1))
            print(f"  {held}: {np.median(errs[-1]):.3f}", flush=True)
            continue
        if variant == "insample":
            test = D.pairs(study.wide, study.gpus, [held])
            pred = study.fit_predict(D.pairs(study.wide, study.gpus, study.gpus), test, set(), None)
        elif variant == "drop":
            every = D.pairs(study.wide, rest, [held])
            full = study.fit_predict(D.pairs(study.wide, rest, rest), every, set(), None)  # one fit serves all drops
            for drop in rest:
                keep = [g for g in rest if g != drop]
                rows = (every.origin != drop).to_numpy()
                test = every[rows]
                less = study.fit_predict(D.pairs(study.wide, keep, keep), test, set(), None)
                print(f"  {held}: without {drop} {median_err(less, test):.3f}, with it "
                      f"{median_err(full[rows], test):.3f} (same test rows: origins other than the dropped GPU)",
                      flush=True)
            continue
        else:
            test = D.pairs(study.wide, rest, [held])
            pred = study.fit_predict(D.pairs(study.wide, rest, rest), test, extras, loss, hopper)
        errs.append(np.abs(pred / test.t_target_ms.to_numpy() - 1))
        print(f"  {held}: {np.median(errs[-1]):.3f}", flush=True)
    if errs:
        print(f"{variant}: all {np.median(np.concatenate(errs)):.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--data", type=Path, default=T.DATA)
    a = ap.parse_args()
    study = Study(a.data, a.seeds)
    for v in a.variants:
        print(v, flush=True)
        run(study, v)


if __name__ == "__main__":
    main()

"""Can a learned model beat the wave law on library GEMMs *inside training steps*? (issue 6, measured answer: no)

    python benchmarks/learned/instep_residual.py [--shared ../shared] [--out benchmarks/results]

Data: every pair of benchmarks/accuracy.py (full-SM trace of a workload -> the measured trace of the same
workload on another GPU or SM count). Per (pair, op signature = name + input shapes + dtypes) the measured
per-step library-kernel time on the target against the engine's wave-law prediction. Model: t = wave x
2^(learned log2 correction) per kernel (clipped to 0.5x..2x), an ensemble of 3 small networks (or a linear
model) on physics features: origin time, SM ratio, green-context oversubscription, fractional waves, tile-level
waves (tile from the kernel name, tiles from the op's dims), static-grid rounds, FLOP share u, γ, bandwidth and
peak ratios, pipe and persistence flags. Loss: L1 in log2, weighted by sqrt(predicted time).
Splits (none sees its test rows): our collected set -> the shared set (other workloads, 64 SMs: never trained
on); collected without the 100-SM (48-SM) targets -> those targets; leave-one-workload-out within collected.
Score: time-weighted |error| of the per-step GEMM time per op signature. Writes learned_instep.md.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import accuracy as A  # noqa: E402
from habitat_trace.ingest import classify as K  # noqa: E402
from habitat_trace.ingest import load  # noqa: E402
from habitat_trace.ingest import schema as S  # noqa: E402
from habitat_trace.scale import engine as E  # noqa: E402
from habitat_trace.scale.cost import gemm_dims  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402

SEEDS = (0, 1, 2)
EPOCHS = 400
HIDDEN = 16
MAX_LOG2_CORRECTION = 1.0
TILE = re.compile(r"nvjet_sm\d+_[a-z]*tst_(\d+)x(\d+)_|tilesize(\d+)x(\d+)x|_(\d+)x(\d+)_")


def kernel_rows(shared: Path) -> pd.DataFrame:
    """One row per GEMM kernel of every origin trace and pair: engine facts, wave prediction, measured target
    time of the kernel's op signature per step."""
    catalog = load_catalog(A.SM_SPECS)
    frames = []
    for dataset, folder in A.datasets(shared):
        cache: dict[str, object] = {}
        for category, o, m in A.pairs(folder):
            trace = cache.get(o["trace"]) or cache.setdefault(o["trace"], load(folder / o["trace"]))
            measured = load(folder / m["trace"])
            origin, target = catalog.for_device(trace.device_name), catalog.resolve(A.target_name(m))
            df = _origin_rows(trace, origin, target, catalog)
            ok, key = _signatures(measured)
            per_step = pd.Series(measured.gpu[S.DUR].to_numpy()[ok].astype(float)).groupby(key[ok]).sum()
            df["t_meas"] = df.key.map(per_step / max(len(measured.steps), 1)).astype(np.float64)
            df["pair"] = f"{dataset}|{o['workload']}|{origin.name}|{target.name}"
            df["dataset"], df["workload"], df["target"] = dataset, o["workload"], target.name
            frames.append(df[df.t_meas.notna() & (df.t_o > 0)])
    return pd.concat(frames, ignore_index=True)


def _signatures(trace) -> tuple[np.ndarray, np.ndarray]:
    g, ops = trace.gpu, trace.ops
    op = g[S.OP].to_numpy()
    ok = (g[S.STEP].to_numpy() >= 0) & (g[S.KCLASS].to_numpy() == K.GEMM) & (op >= 0)
    names, dims, types = ops[S.NAME].to_numpy(), ops[S.INPUT_DIMS].to_numpy(), ops[S.INPUT_TYPES].to_numpy()
    key = np.array([f"{names[o]}|{dims[o]}|{types[o]}" if o >= 0 else "" for o in op.tolist()], dtype=object)
    return ok, key


def _origin_rows(trace, origin, target, catalog) -> pd.DataFrame:
    g = trace.gpu
    pred = E.predict(trace, origin, target)
    f = E.kernel_facts(trace, origin, target)
    ok, key = _signatures(trace)
    ops = trace.ops
    bmnk = [gemm_dims(str(ops[S.NAME].iat[o]), ops[S.INPUT_DIMS].iat[o]) if o >= 0 else None
            for o in g[S.OP].to_numpy().tolist()]

    def chip(spec):
        return catalog.resolve(spec.base).sms if spec.base else spec.sms

    df = pd.DataFrame({
        "key": key, "name": g[S.NAME].to_numpy(), "t_o": g[S.DUR].to_numpy().astype(float),
        "t_p": pred.dur_ns.astype(float), "w_o": f["waves_origin"], "w_t": f["waves_target"],
        "u": np.nan_to_num(f["flop_share"]), "gamma": f["gamma"], "pipe": f["pipe"],
        "blocks": (g[S.GRID_X] * g[S.GRID_Y] * g[S.GRID_Z]).to_numpy().astype(float),
        "persistent": E._name_matches(g[S.NAME], E.PERSISTENT_KERNELS), "bmnk": bmnk})[ok]
    df["steps"] = max(len(trace.steps), 1)
    for side, spec in (("o", origin), ("t", target)):
        df[f"sms_{side}"], df[f"chip_{side}"] = spec.sms, chip(spec)
        df[f"bw_{side}"] = spec.memory_bandwidth_gbs
        df[f"peak_{side}"] = [spec.pipe_peak_tflops(p) for p in df["pipe"]]
    return df


def features(d: pd.DataFrame) -> pd.DataFrame:
    def lg(x):
        return np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1e-9))

    tiles = np.array([_tiles(b, n) for b, n in zip(d.bmnk, d["name"])])
    known = np.isfinite(tiles)
    t = np.where(known, tiles, d.blocks)
    blocks = np.maximum(d.blocks.to_numpy(), 1)
    frac = np.maximum(d.w_t, 1) / np.maximum(d.w_o, 1)
    tile_waves = np.ceil(t / d.sms_t) / np.ceil(t / d.sms_o)
    grid_t = np.where(d.chip_t > d.sms_t, blocks, blocks * d.sms_t / d.sms_o)  # a partition keeps the grid
    rounds = (np.ceil(grid_t / d.sms_t) * np.ceil(t / grid_t)) / (np.ceil(blocks / d.sms_o) * np.ceil(t / blocks))
    return pd.DataFrame({
        "log_t_origin": lg(d.t_o / 1e3), "log_sm_ratio": lg(d.sms_o / d.sms_t),
        "log_oversubscription": lg(d.chip_t / d.sms_t) - lg(d.chip_o / d.sms_o),
        "log_waves_origin": lg(d.w_o.clip(1 / 64)),
        "log_frac_wave_ratio": lg(frac), "log_tile_waves_vs_frac": lg(tile_waves) - lg(frac),
        "log_rounds_vs_frac": lg(rounds) - lg(frac), "log_tiles_per_cta": lg(t / blocks), "tiles_known": known * 1.0,
        "u": d.u, "gamma": d.gamma, "log_bw_ratio": lg(d.bw_o / d.bw_t), "log_peak_ratio": lg(d.peak_o / d.peak_t),
        "persistent": d.persistent * 1.0, "fp32": (d["pipe"] == "fp32") * 1.0, "tf32": (d["pipe"] == "tf32") * 1.0,
        "fp8": (d["pipe"] == "fp8") * 1.0, "log_wave_ratio": lg(d.t_p / d.t_o)})


def _tiles(bmnk, name: str) -> float:
    m = TILE.search(name)
    if bmnk is None or m is None:
        return np.nan
    tm, tn = (int(x) for x in next(g for g in (m.groups()[i:i + 2] for i in (0, 2, 4)) if g[0]))
    b, mm, nn, _ = bmnk
    return b * min(np.ceil(mm / tm) * np.ceil(nn / tn), np.ceil(mm / tn) * np.ceil(nn / tm))


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, hidden: int):
    import torch

    torch.set_num_threads(1)
    mean, std = x.mean(0), x.std(0) + 1e-6
    xt, yt = torch.tensor((x - mean) / std, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    wt = torch.tensor(w / w.mean(), dtype=torch.float32)
    nets = []
    for seed in SEEDS:
        torch.manual_seed(seed)
        layers = [torch.nn.Linear(x.shape[1], hidden), torch.nn.SiLU(), torch.nn.Linear(hidden, 1)] if hidden \
            else [torch.nn.Linear(x.shape[1], 1)]
        net = torch.nn.Sequential(*layers)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-2)
        for _ in range(EPOCHS):
            loss = ((net(xt)[:, 0] - yt).abs() * wt).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        nets.append(net)

    def predict(xq: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            q = torch.tensor((xq - mean) / std, dtype=torch.float32)
            return np.mean([n(q)[:, 0].numpy() for n in nets], axis=0)
    return predict


def score(d: pd.DataFrame, rows: np.ndarray, corr: np.ndarray) -> tuple[float, float]:
    """(wave, learned) time-weighted |error| of the per-step GEMM time per (pair, op signature)."""
    t = d[rows].assign(t_new=d.t_p[rows] * np.exp2(np.clip(corr, -MAX_LOG2_CORRECTION, MAX_LOG2_CORRECTION)))
    k = t.groupby(["pair", "key"]).agg(tp=("t_p", "sum"), tn=("t_new", "sum"), st=("steps", "first"),
                                       tm=("t_meas", "first"))
    tp, tn = k.tp / k.st, k.tn / k.st
    return 100 * (tp - k.tm).abs().sum() / k.tm.sum(), 100 * (tn - k.tm).abs().sum() / k.tm.sum()


def splits(d: pd.DataFrame):
    coll, shared = (d.dataset == "collected").to_numpy(), (d.dataset == "shared").to_numpy()
    yield "collected -> shared (64 SMs and cross-GPU; unseen workloads)", coll, shared
    for held in ("SM100", "SM48"):
        te = coll & d.target.str.contains(held).to_numpy()
        yield f"collected without {held} targets -> {held}", coll & ~te, te
    for wl in sorted(d[coll].workload.unique()):
        te = coll & (d.workload == wl).to_numpy()
        yield f"LOWO:{wl}", coll & ~te, te


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = ap.parse_args()
    d = kernel_rows(a.shared)
    x = features(d).to_numpy(np.float64)
    key_pred = d.groupby(["pair", "key"]).t_p.transform("sum") / d.steps
    y = np.log2(d.t_meas / key_pred).to_numpy()
    w = np.sqrt(d.t_p / d.steps).to_numpy()
    lines = ["| split | wave law | MLP (1x16) correction | linear correction |", "|---|---:|---:|---:|"]
    lowo = {h: np.zeros(len(d)) for h in (HIDDEN, 0)}
    lowo_rows = np.zeros(len(d), dtype=bool)
    for label, tr, te in splits(d):
        got = {}
        for hidden in (HIDDEN, 0):
            corr = fit(x[tr], y[tr], w[tr], hidden)(x[te])
            if label.startswith("LOWO:"):
                lowo[hidden][te] = corr
            got[hidden] = score(d, te, corr)
        if label.startswith("LOWO:"):
            lowo_rows |= te
            continue
        lines.append(f"| {label} | {got[HIDDEN][0]:.1f}% | {got[HIDDEN][1]:.1f}% | {got[0][1]:.1f}% |")
        print(lines[-1], flush=True)
    base, mlp = score(d, lowo_rows, lowo[HIDDEN][lowo_rows])
    lines.append(f"| leave-one-workload-out within collected | {base:.1f}% | {mlp:.1f}% | "
                 f"{score(d, lowo_rows, lowo[0][lowo_rows])[1]:.1f}% |")
    print(lines[-1])
    (a.out / "learned_instep.md").write_text(
        "# Learned correction of the wave law on in-step library GEMMs (benchmarks/learned/instep_residual.py)\n\n"
        "Time-weighted |error| of each op signature's per-step GEMM time on the target, test rows only.\n\n"
        + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

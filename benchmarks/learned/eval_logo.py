"""Leave-one-GPU-out on the NeuSight FP32 GEMM data: for each GPU, train without it, then predict its latency
for every shape from each other GPU's measured latency. Writes benchmarks/results/learned_logo.{md,csv}.

    python benchmarks/learned/eval_logo.py [--data ../shared/data/neusight]

Methods compared per (shape, origin, held-out target):
  mlp        the shipped method (model.py): physics baseline x the MLP ensemble's correction, bounded below by
             the target's roofline
  linear     least squares on the same features and baseline (same bound): is the MLP worth it?
  tdp-clock  the physics baseline alone (peak x TDP-limited clock, model.baseline_log2_ratio; same bound)
  peak-fp32  t_origin x peak_FP32(origin) / peak_FP32(target), the baseline of issue 6
  wave       our analytic law (wave.py): wave factor x per-SM rate + achievable-bandwidth factor, mixed by
             the achieved-bandwidth gamma, roofline floor. NeuSight records grids and blocks but not registers
             or shared memory: we assume 128 registers/thread and 16 KiB shared memory per block (typical of
             cuBLAS sgemm 128x64/64x64 kernels), and the origin's grid on the target (as the engine does).
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
from habitat_trace.scale import occupancy, wave  # noqa: E402
from training import data as D  # noqa: E402
from habitat_trace.scale.learned import model as M  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
ASSUMED_REGISTERS = 128
DONE_WHEN = 0.15  # issue 6: median per-kernel error on each held-out GPU
ASSUMED_SMEM_BYTES = 16 * 1024
PEAK = M.GPU_FIELDS.index("peak_tflops")
METHODS = ["mlp", "linear", "tdp-clock", "peak-fp32", "wave"]
NOTES = (Path(__file__).resolve().parent / "logo_notes.md").read_text()


def wave_law_ms(p: pd.DataFrame) -> np.ndarray:
    cat = load_catalog()
    out = np.empty(len(p))
    for (o_name, t_name), idx in p.groupby(["origin", "target"]).indices.items():
        o, t = cat.resolve(o_name), cat.resolve(t_name)
        q = p.iloc[idx]
        t_o = q.t_origin_ms.to_numpy() * 1e6  # ns
        blocks, thr = q.blocks_origin.to_numpy(), q.threads_origin.to_numpy().astype(np.int64)
        w = []
        for s in (o, t):
            bps = np.maximum(occupancy.blocks_per_sm(thr, ASSUMED_REGISTERS, ASSUMED_SMEM_BYTES, s.occupancy), 1)
            w.append(occupancy.waves(blocks, bps, s.sms))
        bw = [wave.achievable_bandwidth_gbs(s.sms, s.boost_clock_mhz, s.memory_bandwidth_gbs, np.minimum(wi, 1))
              for s, wi in zip((o, t), w)]
        f_comp = wave.wave_factor(w[0], w[1], np.zeros(len(q), bool)) * (o.fp32_tflops / o.sms) / (t.fp32_tflops / t.sms)
        flops, nbytes = M.gemm_cost(q.b, q.m, q.n, q.k)
        gamma = np.clip(nbytes / (t_o * bw[0]), 0, 1)
        t_t = wave.combine(t_o, gamma, bw[0] / bw[1], f_comp)
        floor = np.maximum(flops / (t.fp32_tflops * 1e3), nbytes / (wave.ACHIEVABLE_BANDWIDTH_FRACTION * t.memory_bandwidth_gbs))
        out[idx] = np.maximum(t_t, floor) / 1e6
    return out


def linear_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    a = np.c_[x, np.ones(len(x))]
    return np.linalg.lstsq(a, y, rcond=None)[0]


def evaluate(wide: pd.DataFrame) -> pd.DataFrame:
    gpus = D.gpus(wide)
    cat = load_catalog()
    vec = {g: M.gpu_vector(cat.resolve(g)) for g in gpus}
    rows = []
    for held in gpus:
        rest = [g for g in gpus if g != held]
        x_tr, y_tr = T.xy(D.pairs(wide, rest, rest))  # the held-out GPU is in no training row or statistic
        mlp = T.ensemble(T.train(x_tr, y_tr), meta="logo")
        coef = linear_fit(x_tr, y_tr)
        test = D.pairs(wide, rest, [held])
        x, _ = T.xy(test)
        t_o = test.t_origin_ms.to_numpy()
        o, t = np.stack([vec[g] for g in test.origin]), np.stack([vec[g] for g in test.target])
        flops, nbytes = M.gemm_cost(test.b, test.m, test.n, test.k)
        floor = M.roofline_ms(flops, nbytes, t)
        base = M.baseline_log2_ratio(t_o, o, t)
        pred = {
            "mlp": M.predict_target_ms(test.b, test.m, test.n, test.k, t_o, o, t, model=mlp),
            "linear": np.maximum(t_o * np.exp2(base + np.c_[x, np.ones(len(x))] @ coef), floor),
            "tdp-clock": np.maximum(t_o * np.exp2(base), floor),
            "peak-fp32": t_o * o[:, PEAK] / t[:, PEAK],
            "wave": wave_law_ms(test),
        }
        for method, p in pred.items():
            rows.append(test[D.SHAPE + ["origin", "target", "t_origin_ms", "t_target_ms"]].assign(
                method=method, pred_ms=p, rel_err=np.abs(p - test.t_target_ms) / test.t_target_ms))
        print(held, {k: round(float(np.median(np.abs(v - test.t_target_ms) / test.t_target_ms)), 4)
                     for k, v in pred.items()}, flush=True)
    return pd.concat(rows, ignore_index=True)


def report(err: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    by = err.groupby(["target", "method"]).rel_err
    table = pd.DataFrame({"median": by.median(), "p90": by.quantile(0.9), "n": by.size()}).reset_index()
    overall = err.groupby("method").rel_err
    table = pd.concat([table, pd.DataFrame({"target": "all", "method": overall.median().index,
                                            "median": overall.median().values, "p90": overall.quantile(0.9).values,
                                            "n": overall.size().values})], ignore_index=True)
    med = table.pivot(index="target", columns="method", values="median")
    p90 = table.pivot(index="target", columns="method", values="p90")
    met = [g for g in med.index if g != "all" and med.loc[g, "mlp"] <= DONE_WHEN]
    lines = ["# Leave-one-GPU-out, NeuSight FP32 GEMM (bmm + linear)", "",
             "Per-kernel |error| predicting the held-out GPU from each of the other four GPUs' measured latency for",
             "the same shape; the held-out GPU's measurements are in no training row or normalization statistic of",
             "its fold (but see the choices made by looking at these results, below). Written by",
             "benchmarks/learned/eval_logo.py (medians, p90, row counts in learned_logo.csv).",
             f"Issue 6 asks for <= {DONE_WHEN:.0%} median (aim 8%): overall {100 * med.loc['all', 'mlp']:.1f}%; "
             f"per GPU met for {', '.join(met) or 'none'}.", ""]
    for title, tab in (("Median", med), ("p90", p90)):
        lines += [f"{title}:", "", "| held-out GPU | " + " | ".join(METHODS) + " |", "|---" * (len(METHODS) + 1) + "|"]
        lines += [f"| {g} | " + " | ".join(f"{100 * tab.loc[g, m]:.1f}%" for m in METHODS) + " |" for g in tab.index]
        lines.append("")
    return table, "\n".join(lines) + "\n" + NOTES


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=T.DATA)
    a = ap.parse_args()
    wide = D.joined(D.load_neusight(a.data))
    err = evaluate(wide)
    table, md = report(err)
    RESULTS.mkdir(parents=True, exist_ok=True)
    table.to_csv(RESULTS / "learned_logo.csv", index=False, float_format="%.4f")
    (RESULTS / "learned_logo.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

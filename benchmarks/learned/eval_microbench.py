"""Would the microbenchmark GEMM ratios (benchmarks/learned/training/microbench.py) beat the wave law in ``scale``
between the H100 SXM and the H200? Runs benchmarks/accuracy.py's cross-GPU pairs twice, once with the engine as
it is and once with the library GEMM kernels re-predicted from the measured ratios, as an engine hook would:

    python benchmarks/learned/eval_microbench.py [--shared ../shared] [--variant all|disagree]

variant ``all``: every GEMM kernel (one ratio per op from its summed GEMM time, split-K reductions included) whose
op has recorded shapes, a dtype with data and a measured shape within ``MAX_LOG2_DISTANCE``; then the roofline
floor. ``disagree``: only where the measured ratio differs from the wave law's op ratio by more than 5% (the
per-shape scatter of compute-bound H200/H100 ratios, IQR/1.35 of the log ratio: 2.5%, doubled).
Writes benchmarks/results/learned_microbench_<variant>.csv (both predictions per pair) and prints per-workload
GEMM-class and busy-time errors. The shared set chose; the collected set is the held-out check.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "benchmarks"))

import accuracy  # noqa: E402
from habitat_trace.ingest import schema as S  # noqa: E402
from habitat_trace.scale import engine  # noqa: E402
from habitat_trace.scale.facts import gemm_kernel_shapes, kernel_facts  # noqa: E402
from training import microbench  # noqa: E402

METHOD = "learned-microbench"
DISAGREE_LOG = float(np.log(1.05))


def gemm_rows(trace, pipe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of GEMM kernels whose op has recorded shapes and a pipe with data, and their (B, M, N, K) (4 x n).
    A CUDA-core kernel counts as fp32 only when its op's inputs are fp32 (as engine._learned_gemm_ns)."""
    rows, bmnk, op_dtype = gemm_kernel_shapes(trace, np.isin(pipe, microbench.DTYPES))
    keep = (pipe[rows] != "fp32") | (op_dtype == "fp32")
    return rows[keep], bmnk[:, keep]


def predict_microbench(trace, origin, target, variant: str):
    pred = engine.predict(trace, origin, target)
    if not microbench.covers(origin, target) or engine.same_gpu(origin, target):
        return pred
    facts = kernel_facts(trace, origin, target)
    pipe = facts["pipe"]
    t_o = trace.gpu[S.DUR].to_numpy().astype(np.float64)
    rows, bmnk = gemm_rows(trace, pipe)
    keep = pred.method[rows] != "learned"  # the FP32 model's GPUs have no microbenchmarks; never both
    rows, bmnk = rows[keep], bmnk[:, keep]
    if not len(rows):
        return pred
    op = trace.gpu[S.OP].to_numpy()[rows]
    t_op = pd.Series(t_o[rows]).groupby(op).transform("sum").to_numpy()
    ratio = np.full(len(rows), np.nan)
    for p in np.unique(pipe[rows]).tolist():
        sel = pipe[rows] == p
        b, m, n, k = bmnk[:, sel]
        ratio[sel] = microbench.gemm_time_ratios(b, m, n, k, p, origin, target, t_op[sel])
    if variant == "disagree":
        r_wave = pd.Series(pred.dur_ns[rows].astype(np.float64)).groupby(op).transform("sum").to_numpy() / t_op
        ratio = np.where(np.abs(np.log(ratio) - np.log(r_wave)) > DISAGREE_LOG, ratio, np.nan)
    use = np.isfinite(ratio)
    t_new = t_o[rows] * ratio
    floor = facts["roofline_floor_ns"][rows]
    t_new = np.where(np.isfinite(floor), np.maximum(t_new, floor), t_new)
    dur, method = pred.dur_ns.copy(), pred.method.copy()
    dur[rows[use]] = np.maximum(np.rint(t_new[use]), 1).astype(np.int64)
    method[rows[use]] = METHOD
    return replace(pred, dur_ns=dur, method=method)


def evaluate(shared: Path, variant: str) -> pd.DataFrame:
    wave = pd.DataFrame(accuracy.run(shared, only_categories=("cross-GPU",)))
    accuracy.predict = lambda t, o, g: predict_microbench(t, o, g, variant)
    try:
        model = pd.DataFrame(accuracy.run(shared, only_categories=("cross-GPU",)))
    finally:
        accuracy.predict = engine.predict
    keys = ["dataset", "workload", "origin", "target"]
    cols = keys + [c for c in wave if c.startswith("class_") or c == "busy_error_pct"]
    return wave[cols].merge(model[cols], on=keys, suffixes=("_wave", "_model"))


def table(d: pd.DataFrame) -> str:
    out = ["| set | workload | origin → target | GEMM ms (measured) | GEMM error wave | model | busy error wave |"
           " model |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in d.itertuples():
        m = r.class_gemm_measured_ms_wave
        e = {s: 100 * (getattr(r, f"class_gemm_predicted_ms_{s}") / m - 1) if m > 0 else np.nan
             for s in ("wave", "model")}
        out.append(f"| {r.dataset} | {r.workload} | {r.origin} → {r.target} | {m:.2f} | {e['wave']:+.1f}% | "
                   f"{e['model']:+.1f}% | {r.busy_error_pct_wave:+.1f}% | {r.busy_error_pct_model:+.1f}% |")
    return "\n".join(out) + "\n"


def summary(d: pd.DataFrame) -> str:
    out = ["| set | pairs | GEMM time-weighted abs error wave | model | same without compiled GPT-2 wave | model |"
           " mean abs busy error wave | model |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ds, g in d.groupby("dataset", sort=False):
        ex = g[~g.workload.str.contains("gpt2_b8_s1024_amp_compiled")]
        tw = {(s, n): _tw(x, s) for s in ("wave", "model") for n, x in (("all", g), ("ex", ex))}
        out.append(f"| {ds} | {len(g)} | {tw['wave', 'all']:.2f}% | {tw['model', 'all']:.2f}% |"
                   f" {tw['wave', 'ex']:.2f}% | {tw['model', 'ex']:.2f}% | {g.busy_error_pct_wave.abs().mean():.2f}% |"
                   f" {g.busy_error_pct_model.abs().mean():.2f}% |")
    return "\n".join(out) + "\n"


def _tw(d: pd.DataFrame, side: str) -> float:
    p, m = d[f"class_gemm_predicted_ms_{side}"].fillna(0), d["class_gemm_measured_ms_wave"].fillna(0)
    return 100 * float((p - m).abs().sum() / m.sum())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--variant", choices=("all", "disagree"), default="all")
    a = ap.parse_args()
    d = evaluate(a.shared, a.variant)
    d.to_csv(ROOT / "benchmarks" / "results" / f"learned_microbench_{a.variant}.csv", index=False,
             quoting=csv.QUOTE_MINIMAL, float_format="%.6g")
    print(summary(d) + "\n" + table(d))


if __name__ == "__main__":
    main()

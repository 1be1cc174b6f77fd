"""Candidate profiler-overhead models, fitted and scored held out on the rows of overhead_features.py (issue 31).

    PYTHONPATH=. python benchmarks/overhead_candidates.py [--features FILE] [--out FILE.md]

Each candidate is a set of per-step terms (a count times a host pace: u, the trace's trivial-op unit, or L, its
median kernel-launch call) with non-negative coefficients, fitted by least squares on (needed overhead) weighted by
1 / the un-profiled step, as overhead_eval.fit. Scored on the host-bound rows only (the calibration runs, whose
issue time is host time by construction, and the launch-bound loop rows), each row predicted by a fit that did not
see it: leave one workload family out (LOFO) and leave one host out (LOHO: H100 vs H200). A row's error is the origin
row's: for a loop row the model's origin row moved by (model overhead - candidate), judged against the measured loop
(accuracy.judged_error); for a calibration row (profiled - candidate) against the un-profiled issue time. "current"
is the module's model with its shipped coefficients (fitted on the calibration rows: in-sample there).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import accuracy as A
from overhead_eval import nnls
from habitat_trace.timeline import overhead as OH

ROOT = Path(__file__).resolve().parent.parent
ISSUE16_K = (6.81, 1.18)  # K_OP, K_SHAPES of the model before issue 31 (overhead.py at 4d0fb84, fitted at issue 16)
LAUNCH_REF_NS = 8000.0  # median of the 24 calibration traces' median launch call (features.csv: 8.0-8.4 us)
FEATURES = ROOT / "benchmarks/results/profiler_overhead/features.csv"
SCALEOUT = ROOT / "benchmarks/results/scaleout"

# name -> terms; a term is (count column, pace column); pace "one" = a constant ms per step per count
CANDIDATES: dict[str, list[tuple[str, str]]] = {
    "ops.u + shapes.u (refit)": [("n_ops", "u_ns"), ("n_shapes", "u_ns")],
    "ops.u": [("n_ops", "u_ns")],
    "ops.L": [("n_ops", "launch_p50_ns")],
    "ops.u + ops.L": [("n_ops", "u_ns"), ("n_ops", "launch_p50_ns")],
    "ops.u + inputs.u": [("n_ops", "u_ns"), ("n_inputs", "u_ns")],
    "ops.u + dims.u": [("n_ops", "u_ns"), ("n_dims", "u_ns")],
    "ops.u + foreach inputs.u": [("n_ops", "u_ns"), ("n_foreach_inputs", "u_ns")],
    "ops.u + calls.u": [("n_ops", "u_ns"), ("n_calls", "u_ns")],
    "ops.u + kernels.u": [("n_ops", "u_ns"), ("n_kernels", "u_ns")],
    "ops.u + calls.L": [("n_ops", "u_ns"), ("n_calls", "launch_p50_ns")],
    "ops.u + leaf.u": [("n_ops", "u_ns"), ("n_leaf", "u_ns")],
    "ops.u + top.u": [("n_ops", "u_ns"), ("n_top", "u_ns")],
    "ops.u + depth.ops.u": [("n_ops", "u_ns"), ("depth_ops", "u_ns")],
    "ops.u + long ops": [("n_ops", "u_ns"), ("op_ms", "one")],
    "ops.uL": [("n_ops", "uL_ns")],
    "ops.u + inputs.u + calls.u": [("n_ops", "u_ns"), ("n_inputs", "u_ns"), ("n_calls", "u_ns")],
    "ops.u + profiled step": [("n_ops", "u_ns"), ("profiled_ms", "one")],
    "profiled step": [("profiled_ms", "one")],
    "host time outside calls": [("free_ms", "one")],
    "ops.u + host time outside calls": [("n_ops", "u_ns"), ("free_ms", "one")],
    "ops.u + shapes.u + host time outside calls": [("n_ops", "u_ns"), ("n_shapes", "u_ns"), ("free_ms", "one")],
    **{f"ops.u + host time outside calls, capped at {c} u an op": [("n_ops", "u_ns"), (f"free_cap{c}_ms", "one")]
       for c in (8, 16, 32, 64)},
    "ops.L + host time outside calls": [("n_ops", "launch_p50_ns"), ("free_ms", "one")],
    "ops.u + ops.u^2/u0": [("n_ops", "u_ns"), ("n_ops", "u2_ns")],
    "ops.u + ops.L^2/L0": [("n_ops", "u_ns"), ("n_ops", "L2_ns")],
}


def load_rows(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path)
    d = d[(d["set"] == "calibration") | d["launch_bound"].astype(bool)].copy()
    d["uL_ns"] = np.sqrt(d["u_ns"] * d["launch_p50_ns"])  # geometric mean of the two paces
    # u^2 / u0 and L^2 / L0 (u0 = dp_host.HOST_UNIT_NS, the calibration median; L0 = 8 us, the calibration traces'
    # median launch): a cost per op that grows faster than the recording's pace
    d["u2_ns"] = d["u_ns"] ** 2 / OH.FALLBACK_UNIT_NS
    d["L2_ns"] = d["launch_p50_ns"] ** 2 / LAUNCH_REF_NS
    d["depth_ops"] = d["depth_mean"] * d["n_ops"]
    d["one"] = 1e6  # op_ms is in ms already: x one x 1e-6 = ms
    d["base_ms"] = np.where(d["set"] == "calibration", d["measured_median_ms"],
                            (d["measured_median_ms"] + d["measured_steady_ms"]) / 2)
    return d.reset_index(drop=True)


def design(d: pd.DataFrame, terms: list[tuple[str, str]]) -> np.ndarray:
    return np.column_stack([d[c].to_numpy(float) * d[p].to_numpy(float) * 1e-6 for c, p in terms])


def fit(d: pd.DataFrame, terms: list[tuple[str, str]]) -> np.ndarray:
    w = 1.0 / d["base_ms"].to_numpy(float)
    return nnls(design(d, terms) * w[:, None], d["needed_ms"].to_numpy(float) * w)


def row_errors(d: pd.DataFrame, overhead_ms: np.ndarray) -> np.ndarray:
    """Signed % error of each row's origin row when the overhead removed is ``overhead_ms``."""
    out = np.empty(len(d))
    for i, r in enumerate(d.itertuples()):
        if r.set == "calibration":
            out[i] = 100 * (r.needed_ms - overhead_ms[i]) / r.measured_median_ms
        else:
            out[i] = A.judged_error(r.origin_ms + r.model_ms - overhead_ms[i], r.measured_median_ms,
                                    r.measured_steady_ms)
    return out


def held_out(d: pd.DataFrame, terms: list[tuple[str, str]], key: str, train: pd.Series) -> np.ndarray:
    """Each row's overhead from a fit on the ``train`` rows that do not share its ``key``."""
    pred = np.full(len(d), np.nan)
    x = design(d, terms)
    for v in d[key].unique():
        k = fit(d[train & (d[key] != v)], terms)
        m = (d[key] == v).to_numpy()
        pred[m] = x[m] @ k
    return pred


def issue16(d: pd.DataFrame) -> np.ndarray:
    """The issue-16 model's raw cost (ISSUE16_K; these traces carry no python or [memory] events), before placement."""
    k_op, k_shapes = ISSUE16_K
    return d["u_ns"].to_numpy(float) * (k_op * d["n_ops"] + k_shapes * d["n_shapes"]).to_numpy(float) * 1e-6


def stats(err: np.ndarray) -> str:
    return f"{np.mean(np.abs(err)):5.1f}% ({np.mean(err):+5.1f}%)"


def table(d: pd.DataFrame, train_name: str, train: pd.Series) -> list[str]:
    sets = (("calibration", d["set"] == "calibration"), ("loop rows", d["set"] != "calibration"))
    out = [f"\nfitted on: {train_name} ({int(train.sum())} rows); mean |error| (bias) of the origin row, held out",
           "", "| candidate | coefficients (all rows) | " + " | ".join(f"{s} LOFO | {s} LOHO" for s, _ in sets) + " |",
           "|---|---|" + "---:|---:|" * len(sets)]
    for name, k, base in ((f"issue 16 (shipped before), raw", ISSUE16_K, issue16(d)),
                          (f"module now, placed", (OH.K_OP, OH.K_HOST), d["model_ms"].to_numpy(float))):
        cells = []
        for s, m in sets:
            e = row_errors(d, base)[m.to_numpy()]
            cells += [stats(e), stats(e)]
        out.append(f"| {name} | {', '.join(map(str, k))} | " + " | ".join(cells) + " |")
    for name, terms in CANDIDATES.items():
        k = fit(d[train], terms)
        fo, ho = held_out(d, terms, "family", train), held_out(d, terms, "host", train)
        cells = []
        for s, m in sets:
            mm = m.to_numpy()
            cells += [stats(row_errors(d, fo)[mm]), stats(row_errors(d, ho)[mm])]
        out.append(f"| {name} | {', '.join(f'{x:.2f}' for x in k)} | " + " | ".join(cells) + " |")
    return out


def repeats(d: pd.DataFrame) -> list[str]:
    """Within repeat recordings of one workload on one host (benchmarks/traces' full-SM and SM-limited runs, each with
    its own loop): does the needed cost per op follow the recording's pace (u, the launch call, the profiled step)?"""
    loop = d[d["set"] != "calibration"].copy()
    loop["group"] = loop["workload"].str.replace(r"_sm\d+$", "", regex=True) + "@" + loop["host"]
    loop = loop[loop.groupby("group")["group"].transform("size") >= 2]
    loop["need_op"] = loop["needed_ms"] / loop["n_ops"]
    cols = ("u_ns", "launch_p50_ns", "profiled_ms")
    for c in ("need_op", *cols):
        v = np.log(loop[c].clip(lower=1e-6))
        loop["d" + c] = v - v.groupby(loop["group"]).transform("mean")
    corr = ", ".join(f"{c} {np.corrcoef(loop['dneed_op'], loop['d' + c])[0, 1]:.2f}" for c in cols)
    return [f"\nrepeat recordings ({loop['group'].nunique()} workload x host groups, {len(loop)} launch-bound rows): "
            f"within a group, the needed overhead per op correlates with {corr}"]


def sessions(folder: Path = SCALEOUT) -> list[str]:
    """The one-GPU origin rows of the multi-GPU sessions (scaleout_eval.py's tables): how much of their error is the
    same program's spread between host sessions, which no feature of the program can remove."""
    d = pd.concat([pd.read_csv(f) for f in sorted(folder.glob("h100x*.csv"))])
    g = d.groupby(["host", "workload"]).agg(meas=("measured_1gpu_ms", "first"), rep=("replayed_1gpu_ms", "first"))
    g = g.reset_index().drop_duplicates(["workload", "meas", "rep"])  # a session's tables share its one-GPU row
    g["lerr"] = np.log(g["rep"] / g["meas"])
    rep = g[g.groupby("workload")["workload"].transform("size") >= 2].copy()
    n = rep.groupby("workload").size()
    within = float(((n - 1) * rep.groupby("workload")["lerr"].var(ddof=1)).sum() / (n - 1).sum())
    for c in ("meas", "rep"):
        rep["d" + c] = np.log(rep[c]) - rep.groupby("workload")[c].transform(lambda x: np.log(x).mean())
    derr = rep["drep"] - rep["dmeas"]
    return [f"\nmulti-GPU sessions' one-GPU rows: {len(g)} rows, {g['workload'].nunique()} workloads; of the "
            f"{len(rep)} rows of {rep['workload'].nunique()} workloads seen more than once, log-error SD "
            f"{100 * rep['lerr'].std(ddof=1):.1f}%, within a workload {100 * np.sqrt(within):.1f}%; within a workload "
            f"the replay varies {100 * rep['drep'].std(ddof=1):.1f}% and the measured loop "
            f"{100 * rep['dmeas'].std(ddof=1):.1f}% (correlation {np.corrcoef(rep['drep'], rep['dmeas'])[0, 1]:.2f}); "
            f"the error follows the replay ({np.corrcoef(derr, rep['drep'])[0, 1]:.2f}) more than the loop "
            f"({np.corrcoef(derr, rep['dmeas'])[0, 1]:.2f})"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", type=Path, default=FEATURES)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    d = load_rows(a.features)
    lines = [f"{len(d)} host-bound rows: {int((d['set'] == 'calibration').sum())} calibration, "
             f"{int((d['set'] != 'calibration').sum())} launch-bound loop rows; families "
             f"{d['family'].nunique()}, hosts {sorted(d['host'].unique())}"]
    for name, train in (("calibration rows", d["set"] == "calibration"), ("loop rows", d["set"] != "calibration"),
                        ("all rows", d["set"].notna())):
        lines += table(d, name, train)
    lines += repeats(d) + sessions()
    print("\n".join(lines))
    if a.out:
        a.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

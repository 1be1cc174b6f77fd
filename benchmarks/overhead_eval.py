"""Evaluate habitat_trace.timeline.overhead: profiled CPU step minus the estimated overhead vs the un-profiled time.

    PYTHONPATH=. python benchmarks/overhead_eval.py [--csv out.csv]

1. fit: refits the model's coefficients (non-negative least squares) from the device measurements in
   benchmarks/results/profiler_overhead/*_overhead.jsonl, on both hosts and on each host alone, and scores
   each host-alone fit on the other host's rows (leave-one-host-out) and each fit without a workload on
   that workload (leave-one-workload-out).
2. traces: for every trace with ground truth - ../shared/data/traces (SHARED), benchmarks/traces (COLLECTED),
   benchmarks/traces/overhead (ours) - the profiled CPU step, the estimated overhead, and the un-profiled time.
   Only launch-bound rows (busy kernel time < LAUNCH_BOUND x un-profiled time) are scored: there the host
   sets the iteration, so CPU step - overhead should match it. Our traces' steps end in a synchronize, so
   for them the profiled time is the measured host issue time (profiled median) and the target the
   un-profiled issue time.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from habitat_trace.ingest import load
from habitat_trace.timeline import overhead as OH

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results/profiler_overhead"
SHARED = ROOT.parent / "shared/data/traces"
COLLECTED = ROOT / "benchmarks/traces"
LAUNCH_BOUND = 0.6  # kernel busy time under 60% of the iteration: the host's issue time sets the iteration
FIT_VARIANTS = ("a_shapes", "b_noshapes", "c_stack", "d_memory")  # variants with CPU ops (u measurable)


# ---------------------------------------------------------------- fit on the device measurements
def trace_unit_ns(host: str, workload: str) -> float:
    """u of the kept variant-(a) trace, as the module reads it."""
    path = ROOT / "benchmarks/traces/overhead" / host / f"{workload}.pt.trace.json.gz"
    return float(OH.estimate(load(path)).evidence.unit_ns)


def device_rows() -> list[dict]:
    """One row per (host, workload, variant a-d): overhead d_ms and u. Only variant (a)'s trace was kept, so
    u of variants b-d is u(a) x (their pooled trivial-op p10 / (a)'s): same op mix, so the ratio is the host's
    speed change between the runs."""
    rows = []
    for path in sorted(RESULTS.glob("*_overhead.jsonl")):
        host = path.name.split("_")[0]
        recs = [json.loads(line) for line in path.open()]
        base = {r["workload"]: r for r in recs if r["variant"] == "none"}
        pooled_a = {r["workload"]: r["trivial_op_us_p10"] for r in recs if r["variant"] == "a_shapes"}
        unit_a = {w: trace_unit_ns(host, w) for w in pooled_a}
        for r in recs:
            if r["variant"] in FIT_VARIANTS and r.get("trivial_op_us_p10"):
                b, w = base[r["workload"]], r["workload"]
                rows.append(dict(r, host=host, d_ms=r["prof_issue_ms"] - b["issue_ms"], issue_ms=b["issue_ms"],
                                 unit_ns=unit_a[w] * r["trivial_op_us_p10"] / pooled_a[w]))
    return rows


def features(r: dict) -> list[float]:
    u = r["unit_ns"] * 1e-6  # ms
    return [r.get("n_cpu_op_per_step", 0) * u, r.get("n_shapes_per_step", 0) * u,
            r.get("n_python_function_per_step", 0) * u, r.get("n_memory_per_step", 0) * u]


def nnls(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares by dropping negative coefficients and refitting (4 unknowns)."""
    keep = list(range(a.shape[1]))
    while True:
        x = np.zeros(a.shape[1])
        if not keep:
            return x
        sol = np.linalg.lstsq(a[:, keep], y, rcond=None)[0]
        if (sol >= 0).all():
            x[keep] = sol
            return x
        keep = [k for k, v in zip(keep, sol) if v >= 0]


def fit(rows: list[dict]) -> np.ndarray:
    a = np.array([features(r) for r in rows])
    y = np.array([r["d_ms"] for r in rows])
    w = 1.0 / np.array([r["issue_ms"] for r in rows])  # relative errors: small steps count as much as big ones
    return nnls(a * w[:, None], y * w)


def report_fit(rows: list[dict]) -> None:
    print("fit (K_OP, K_SHAPES, K_PYTHON, K_MEMORY), in units of u; module uses",
          (OH.K_OP, OH.K_SHAPES, OH.K_PYTHON, OH.K_MEMORY))
    print(f"  both hosts: {np.round(fit(rows), 2)}  ({len(rows)} rows); median u of the (a) traces "
          f"{np.median([r['unit_ns'] for r in rows if r['variant'] == 'a_shapes']):.0f} ns")
    for host in sorted({r['host'] for r in rows}):
        train = [r for r in rows if r["host"] == host]
        test = [r for r in rows if r["host"] != host]
        k = fit(train)
        pred = np.array([features(r) for r in test]) @ k
        d = np.array([r["d_ms"] for r in test])
        base = np.array([r["issue_ms"] for r in test])
        print(f"  {host} alone: {np.round(k, 2)} -> other host: median |overhead error| "
              f"{np.median(np.abs(pred - d) / base) * 100:.1f}% of the un-profiled step "
              f"(no correction: {np.median(np.abs(d) / base) * 100:.1f}%)")
    errs, errs0 = [], []
    for w in sorted({r["workload"] for r in rows}):  # leave one workload out (both hosts, all its variants)
        test = [r for r in rows if r["workload"] == w]
        k = fit([r for r in rows if r["workload"] != w])
        pred = np.array([features(r) for r in test]) @ k
        d, base = np.array([r["d_ms"] for r in test]), np.array([r["issue_ms"] for r in test])
        errs += list(np.abs(pred - d) / base)
        errs0 += list(np.abs(d) / base)
    print(f"  leave one workload out ({len(errs)} rows): median |overhead error| {np.median(errs) * 100:.1f}% of the "
          f"un-profiled step (no correction: {np.median(errs0) * 100:.1f}%)")


# ---------------------------------------------------------------- traces with ground truth
def gt_rows(folder: Path) -> list[dict]:
    path = folder / "ground_truth.csv"
    if not path.exists():
        return []
    return [dict(r, root=str(folder)) for r in csv.DictReader(path.open())]


def score_ground_truth() -> list[dict]:
    out = []
    for label, folder in (("shared", SHARED), ("collected", COLLECTED)):
        for r in gt_rows(folder):
            steady, kernel = float(r["steady_wall_ms"]), float(r["trace_kernel_ms"])
            if kernel >= LAUNCH_BOUND * steady:
                continue
            est = OH.estimate(load(Path(r["root"]) / r["trace"]))
            cpu = float(r["trace_cpu_step_ms"])
            oh = float(np.median(est.per_step_ns)) / 1e6
            out.append(dict(set=label, target=r["target"], workload=r["workload"], profiled_ms=cpu, overhead_ms=oh,
                            corrected_ms=cpu - oh, unprofiled_ms=steady, u_ns=est.evidence.unit_ns,
                            ops_per_step=est.evidence.ops_per_step))
            out += score_no_shapes(label, r, folder)
    return out


def score_no_shapes(label: str, r: dict, folder: Path) -> list[dict]:
    """The same workload recorded without record_shapes (SHARED/<target>/no_record_shapes/), scored against the
    same un-profiled time; its profiled CPU step is the median ProfilerStep span of that trace."""
    path = folder / r["target"] / "no_record_shapes" / Path(r["trace"]).name
    if not path.exists():
        return []
    trace = load(path)
    est = OH.estimate(trace)
    cpu = float(np.median(trace.steps["dur_ns"].to_numpy())) / 1e6
    oh = float(np.median(est.per_step_ns)) / 1e6
    return [dict(set=label, target=r["target"] + "/noshapes", workload=r["workload"], profiled_ms=cpu, overhead_ms=oh,
                 corrected_ms=cpu - oh, unprofiled_ms=float(r["steady_wall_ms"]), u_ns=est.evidence.unit_ns,
                 ops_per_step=est.evidence.ops_per_step)]


def score_ours() -> list[dict]:
    out = []
    for path in sorted(RESULTS.glob("*_overhead.jsonl")):
        host = path.name.split("_")[0]
        recs = {(r["workload"], r["variant"]): r for r in map(json.loads, path.open())}
        for (w, v), r in recs.items():
            trace = ROOT / "benchmarks/traces/overhead" / host / f"{w}.pt.trace.json.gz"
            if v != "a_shapes" or not trace.exists():
                continue
            b = recs[(w, "none")]
            est = OH.estimate(load(trace))
            oh = float(np.median(est.per_step_ns)) / 1e6
            out.append(dict(set="ours", target=host, workload=w, profiled_ms=r["prof_issue_ms"], overhead_ms=oh,
                            corrected_ms=r["prof_issue_ms"] - oh, unprofiled_ms=b["issue_ms"],
                            u_ns=est.evidence.unit_ns, ops_per_step=est.evidence.ops_per_step))
    return out


def print_table(rows: list[dict]) -> None:
    print(f"\n{'set':9s} {'target':15s} {'workload':34s} {'prof':>7s} {'-ovh':>6s} {'corr':>7s} {'real':>7s} "
          f"{'err':>6s} {'err0':>6s} {'u_ns':>5s}")
    for r in rows:
        e = (r["corrected_ms"] - r["unprofiled_ms"]) / r["unprofiled_ms"] * 100
        e0 = (r["profiled_ms"] - r["unprofiled_ms"]) / r["unprofiled_ms"] * 100
        print(f"{r['set']:9s} {r['target']:15s} {r['workload'][:34]:34s} {r['profiled_ms']:7.2f} {r['overhead_ms']:6.2f} "
              f"{r['corrected_ms']:7.2f} {r['unprofiled_ms']:7.2f} {e:+5.0f}% {e0:+5.0f}% {r['u_ns']:5d}")
    for label in ("shared", "collected", "ours"):
        sel = [r for r in rows if r["set"] == label]
        if not sel:
            continue
        e = np.array([(r["corrected_ms"] - r["unprofiled_ms"]) / r["unprofiled_ms"] for r in sel]) * 100
        e0 = np.array([(r["profiled_ms"] - r["unprofiled_ms"]) / r["unprofiled_ms"] for r in sel]) * 100
        print(f"{label:9s} n={len(sel):2d}: corrected median error {np.median(e):+.0f}% (median |err| "
              f"{np.median(np.abs(e)):.0f}%), uncorrected {np.median(e0):+.0f}% (|err| {np.median(np.abs(e0)):.0f}%)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", help="write the per-trace rows here")
    a = ap.parse_args(argv)
    report_fit(device_rows())
    rows = score_ours() + score_ground_truth()
    print_table(rows)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

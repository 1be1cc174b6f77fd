"""The origin row's range and the user's anchor (issue 35), against real loops measured without the profiler.

    PYTHONPATH=. python benchmarks/range_eval.py [--heldout DIR ...] [--dist DIR ...] [--out DIR]

1. band: the pace factors of timeline/hostband.py (PACE_FAST, PACE_SLOW), re-derived from the dev traces alone:
   the overhead calibration's 24 traces (their loop: profiler_overhead/*_overhead.jsonl, variant "none"), ../shared
   (with its no-record_shapes twins) and benchmarks/traces. Per launch-bound origin row (kernels under
   accuracy.LAUNCH_BOUND_KERNEL_SHARE of the real loop), the real loop over the fastest de-profiled steady step
   (the score of the fast end) and over the de-profiled iteration (the slow end), both on the central host clock and
   never below what the trace proves; the split-conformal order statistics (Lei et al., JASA 2018) that leave at
   most 5% of such rows outside each end.
2. held out (``--heldout DIR``: a folder of collect/launch_bound.py runs merged by collect/summarize.py;
   ``--dist DIR``: collect_distributed.py's ground_truth.jsonl with its traces under DIR/traces): every origin row
   as compare prints it, judged against its loop (overhead_eval.judged: inside when the range meets [median, steady]),
   per recording option; coverage and width (high / low) of launch-bound rows.
3. anchor: each held-out workload with targets measured on the same host (green contexts of fewer SMs): compare's
   rows with the origin's measured steady wall time given (``Host.measured_step_ms``, as ``--measured-step``), the
   origin row (exactly the step given) and each target judged against its loop; and the same rows without it.
Writes range_rows.csv, anchor_rows.csv and range.md into --out (default benchmarks/results/launch_bound).
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

import accuracy as A
import overhead_eval as E
from habitat_trace import pipeline
from habitat_trace.ingest import load
from habitat_trace.pipeline.figures import iteration_and_fastest
from habitat_trace.scale.specs import load_catalog
from habitat_trace.timeline import hostband

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/launch_bound"
TAIL = 0.05  # each end of the range may miss this share of the dev rows
# A target whose trace launches another number of kernels per steady step than the origin's ran another program
# (L-BFGS converged between the two loops: 5 closure evaluations a step, then 1): its pair is left out, and counted.
SAME_PROGRAM_KERNELS = 0.10


# ---------------------------------------------------------------- 1. band, from the dev traces
def dev_traces() -> list[tuple[str, Path, float, float]]:
    """(set, trace, loop median ms, loop steady ms) of every dev trace with a measured real loop."""
    out = [(label, folder / r["trace"], float(r["median_ms"]), float(r["steady_wall_ms"]))
           for label, folder, r, _ in E.traces_with_truth()]
    for jsonl in sorted(E.RESULTS.glob("*_overhead.jsonl")):
        host = jsonl.name.split("_")[0]
        for r in map(json.loads, jsonl.open()):
            if r["variant"] == "none":
                trace = ROOT / "benchmarks/traces/overhead" / host / f"{r['workload']}.pt.trace.json.gz"
                out.append((f"calibration-{host}", trace, r["median_ms"], r["steady_wall_ms"]))
    return out


def band_scores(catalog: object, path: Path, median: float, steady: float) -> dict | None:
    """The fast and slow end's scores of one launch-bound origin row (module doc); None for a GPU-bound one."""
    trace = load(path)
    if step_busy_ms(trace) >= A.LAUNCH_BOUND_KERNEL_SHARE * (median + steady) / 2:
        return None
    run = pipeline.Run([trace], pipeline.Options(catalog))
    rr = run.baseline().ranks[0]
    it, fastest = iteration_and_fastest(rr.tables, rr.timeline)
    floor = run.ranks[0].floor_ms
    lo, hi = min(median, steady), max(median, steady)
    return dict(trace=str(path), fast=hi / max(fastest, floor), slow=lo / max(it, floor))


def step_busy_ms(trace: object) -> float:
    from habitat_trace.timeline.steps import step_figures

    return step_figures(trace.steps, trace.gpu).mean_ms("gpu_busy_ns")  # type: ignore[attr-defined]


def conformal_ends(fast: list[float], slow: list[float], tail: float = TAIL) -> tuple[float, float]:
    """The k-th smallest fast score and the k-th largest slow score, k = floor((n + 1) tail): a new exchangeable row
    falls below the first (or above the second) with probability at most ``tail`` (split conformal)."""
    n = len(fast)
    k = max(int(np.floor((n + 1) * tail)), 1)
    return float(np.sort(fast)[k - 1]), float(np.sort(slow)[::-1][k - 1])


def report_band(catalog: object) -> str:
    rows = [s for s in (band_scores(catalog, p, m, st) for _, p, m, st in dev_traces()) if s is not None]
    fast, slow = conformal_ends([r["fast"] for r in rows], [r["slow"] for r in rows])
    return (f"band: {len(rows)} launch-bound dev origin rows: fast end {fast:.3f}, slow end {slow:.3f} "
            f"(module: PACE_FAST {hostband.PACE_FAST}, PACE_SLOW {hostband.PACE_SLOW})\n")


# ---------------------------------------------------------------- 2. held-out origin rows
def launch_bound_sets(folders: list[Path]) -> list[tuple[str, Path, dict]]:
    """(set, folder, ground-truth row) of every trace in collect/launch_bound.py sets merged by summarize.py."""
    return [(f.name, f, r) for f in folders for r in csv.DictReader((f / "ground_truth.csv").open())]


def dist_rows(folders: list[Path]) -> list[tuple[str, Path, dict]]:
    """collect_distributed.py's one-GPU steps ('single'): their loop is the slowest rank's median and steady time."""
    out = []
    for d in folders:
        for rec in map(json.loads, (d / "ground_truth.jsonl").read_text().splitlines()):
            if rec.get("mode") == "single" and rec.get("status") == "ok":
                path = d / "traces" / rec["traces"][0]
                trace = load(path)
                out.append((d.name, d / "traces", dict(trace=rec["traces"][0], median_ms=rec["slowest_rank_ms"],
                                                       steady_wall_ms=rec["slowest_steady_ms"],
                                                       trace_kernel_ms=step_busy_ms(trace))))
    return out


def origin_rows(catalog: object, items: list[tuple[str, Path, dict]]) -> list[dict]:
    rows = []
    for label, folder, r in items:
        row = E.origin_row(catalog, label, load(folder / r["trace"]), r)
        row["width"] = row["high_ms"] / row["low_ms"] if row["low_ms"] > 0 else float("inf")
        row["variant"] = r["workload"].split("__")[1] if "__" in r.get("workload", "") else ""
        rows.append(row)
    return rows


def coverage_table(rows: list[dict]) -> str:
    out = ["| origin rows, launch-bound | traces | inside the range | width median | p90 | max | mean abs error |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    lb = [r for r in rows if r["launch_bound"]]
    sets = dict.fromkeys(r["set"] for r in lb)
    groups = [("all held out", lb)] + [(s, [r for r in lb if r["set"] == s]) for s in sets]
    groups += [(f"option {o}", [r for r in lb if r["option"] == o]) for o in dict.fromkeys(r["option"] for r in lb)]
    groups += [(f"recording {v}", [r for r in lb if r["variant"] == v]) for v in dict.fromkeys(r["variant"] for r in lb)
               if v in ("cold", "single")]  # launch_bound.py --cold: first-time users' recordings
    for name, sel in groups:
        if sel:
            w = np.array([r["width"] for r in sel])
            out.append(f"| {name} | {len(sel)} | {100 * np.mean([bool(r['inside']) for r in sel]):.1f}% | "
                       f"{np.median(w):.2f}x | {np.quantile(w, 0.9):.2f}x | {w.max():.2f}x | "
                       f"{np.mean(np.abs([r['error_pct'] for r in sel])):.1f}% |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- 3. anchored targets on the same host
def anchor_rows(catalog: object, folders: list[Path]) -> list[dict]:
    """Per held-out trace with same-host targets (the same workload's other SM counts, whatever the trace's recording
    option): the origin and each target, with the origin's steady wall time given and without, judged against
    their loops."""
    rows = []
    for folder in folders:
        truth = list(csv.DictReader((folder / "ground_truth.csv").open()))
        for o in (r for r in truth if int(r["sms"]) == A.FULL_SMS):
            targets = [m for m in truth if base(m) == base(o) and int(m["sms"]) != A.FULL_SMS]
            if not targets:
                continue
            trace = load(folder / o["trace"])
            origin = catalog.for_device(trace.device_name)
            kernels = steady_kernels(trace)
            for given in (float(o["steady_wall_ms"]), None):
                host = pipeline.Host(measured_step_ms=given)
                for m in [o] + targets:
                    target = catalog.resolve(A.target_name(m))
                    h = A.replayed(catalog, trace, origin, target, host).headline
                    other = m is not o and abs(steady_kernels(load(folder / m["trace"])) / kernels - 1) > \
                        SAME_PROGRAM_KERNELS
                    row = dict(set=folder.name, workload=o["workload"], target=target.name, given_ms=given,
                               iteration_ms=h.iteration_ms, source=h.source, range_source=h.range_source,
                               other_program=other)
                    E.judged(row, h.iteration_ms, h.iteration_low_ms, h.iteration_high_ms, m)
                    rows.append(row)
    return rows


def steady_kernels(trace: object) -> float:
    """Mean kernels per steady ProfilerStep (the whole trace without steps)."""
    from habitat_trace.pipeline.figures import steady
    from habitat_trace.timeline.steps import step_figures

    fig = step_figures(trace.steps, trace.gpu).table  # type: ignore[attr-defined]
    return float(fig["kernels"].to_numpy()[steady(fig["number"].to_numpy())].mean())


def base(row: dict) -> str:
    """The workload a launch_bound.py row measured (its name less the recording variant)."""
    return row["workload"].split("__")[0]


def anchor_table(rows: list[dict]) -> str:
    out = ["| launch-bound rows, same host | set | anchor | rows | mean abs error | median | within 10% | inside "
           "range |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for what, pick in (("origin", lambda r: r["target"].startswith("H100 SXM")),
                       ("targets (fewer SMs)", lambda r: not r["target"].startswith("H100 SXM"))):
        for label in ["all", *dict.fromkeys(r["set"] for r in rows)]:
            for anchored in (True, False):
                sel = [r for r in rows if r["launch_bound"] and pick(r) and (r["given_ms"] is not None) == anchored
                       and not r["other_program"] and label in ("all", r["set"])]
                if sel:
                    e = np.abs([r["error_pct"] for r in sel])
                    out.append(f"| {what} | {label} | {'given' if anchored else 'none'} | {len(sel)} | {e.mean():.1f}% "
                               f"| {np.median(e):.1f}% | {100 * np.mean(e <= 10):.0f}% | "
                               f"{100 * np.mean([bool(r['inside']) for r in sel]):.0f}% |")
    other = {(r["workload"], r["target"]) for r in rows if r["other_program"]}
    if other:
        out.append(f"\nleft out: {len(other)} pairs whose target ran another program (kernels per step more than "
                   f"{SAME_PROGRAM_KERNELS:.0%} apart): {', '.join(sorted({w.split('__')[0] for w, _ in other}))}")
    return "\n".join(out) + "\n"


def read_rows(path: Path) -> list[dict]:
    """Rows range_eval wrote (range_rows.csv, anchor_rows.csv) with their types back, for the tables above
    (benchmarks/readme_figures.py renders docs/accuracy.md's from them)."""
    def typed(v: str) -> object:
        if v in ("True", "False"):
            return v == "True"
        try:
            return float(v)
        except ValueError:
            return v if v else None
    return [{k: typed(v) for k, v in r.items()} for r in csv.DictReader(path.open())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heldout", type=Path, action="append", default=[], help="collect/launch_bound.py set (merged)")
    ap.add_argument("--dist", type=Path, action="append", default=[], help="collect_distributed.py folder")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--no-band", action="store_true", help="skip re-deriving the band from the dev traces")
    a = ap.parse_args(argv)
    catalog = load_catalog(A.SM_SPECS)
    md = "" if a.no_band else report_band(catalog)
    print(md, flush=True)
    origins = origin_rows(catalog, launch_bound_sets(a.heldout) + dist_rows(a.dist))
    anchors = anchor_rows(catalog, a.heldout)
    md += "\n" + coverage_table(origins) + "\n" + anchor_table(anchors)
    print(md)
    a.out.mkdir(parents=True, exist_ok=True)
    E.write(a.out, "range_rows.csv", origins)
    E.write(a.out, "anchor_rows.csv", anchors)
    (a.out / "range.md").write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

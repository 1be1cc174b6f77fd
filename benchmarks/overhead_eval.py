"""Evaluate habitat_trace.timeline.overhead and the range of timeline/hostband.py against measured un-profiled loops.

    PYTHONPATH=. python benchmarks/overhead_eval.py [--out benchmarks/results/profiler_overhead] [--no-pairs]

1. fit: refits the model's coefficients (non-negative least squares) from the device measurements in
   benchmarks/results/profiler_overhead/*_overhead.jsonl, on both hosts and on each host alone, and scores
   each host-alone fit on the other host's rows (leave-one-host-out) and each fit without a workload on
   that workload (leave-one-workload-out).
2. band: those held-out predictions as a pace factor rho = un-profiled issue time / (profiled - predicted overhead),
   leave-one-workload-out and leave-one-host-out pooled (issue 28's band; since issue 35 the range's factors are the
   origin rows' own error, benchmarks/range_eval.py). Also the
   loop's own measurement noise (hostband.MEASURED_*) and the profiler's cost per runtime call
   (floors.CUPTI_CALL_MAX_NS). Only the calibration runs enter these; every other set below is scored, never fitted.
3. origin rows: every trace with ground truth in ../shared/data/traces (incl. its no_record_shapes twins) and
   benchmarks/traces: the origin row compare prints (pipeline.Run's headline, same GPU) and its range, judged
   against the measured loop (median_ms, steady_wall_ms: accuracy.judged_error), per recording option (record_shapes,
   with_stack, the hook's measured step), launch-bound rows apart.
4. pairs: accuracy.py's pairs of both sets: each target's iteration and range, on the origin's host and
   host-matched (--cpu-speed from the two traces' u, as accuracy.py), judged the same way.
Writes eval.txt's figures to stdout and origin_rows.csv, pairs_range.csv and range.md into --out.

Held-out sets, scored and never fitted (``--heldout DIR``, repeatable: a ground_truth.csv of collect/heldout.py runs
merged by collect/summarize.py; ``--dist DIR``: collect_distributed.py's ground_truth.jsonl, whose 'single' rows
are one-GPU steps timed without the profiler, beside the tars' <workload>/single/rank0 traces extracted under DIR
or ``--dist-traces``): their origin rows as recorded (with the hook's measured step where the trace carries one)
and as plain traces (the measurement stripped), and their pairs where a set has several settings of a workload;
into origin_rows_heldout.csv, pairs_range_heldout.csv and range_heldout.md.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

import accuracy as A
from habitat_trace import pipeline
from habitat_trace.ingest import load
from habitat_trace.pipeline.figures import steady
from habitat_trace.scale.specs import load_catalog
from habitat_trace.timeline import floors, hostband
from habitat_trace.timeline import overhead as OH
from habitat_trace.timeline.steps import step_figures

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results/profiler_overhead"
SHARED = ROOT.parent / "shared/data/traces"
COLLECTED = ROOT / "benchmarks/traces"
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
    print("issue 16's form refitted (K_OP, K_SHAPES, K_PYTHON, K_MEMORY), in units of u; the module's since issue 31 "
          "(K_OP, K_HOST share, K_PYTHON, K_MEMORY):", (OH.K_OP, OH.K_HOST, OH.K_PYTHON, OH.K_MEMORY),
          "fitted by overhead_candidates.py")
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


# ---------------------------------------------------------------- band: the model's held-out error
def held_out_predictions(rows: list[dict]) -> list[tuple[str, dict, float]]:
    """(fold, row, predicted overhead ms) for every row, from fits that did not see its workload (LOWO) or its
    host (LOHO)."""
    out = []
    for fold, key in (("LOWO", "workload"), ("LOHO", "host")):
        for v in sorted({r[key] for r in rows}):
            k = fit([r for r in rows if r[key] != v])
            out += [(fold, r, float(np.array(features(r)) @ k)) for r in rows if r[key] == v]
    return out


def report_band(rows: list[dict]) -> None:
    """The overhead model's issue-time error as a pace factor (issue 28's band; the range's band is now the origin
    row's own error, benchmarks/range_eval.py), the loop's measurement noise (hostband.MEASURED_*) and the
    profiler's cost per runtime call (floors.CUPTI_CALL_MAX_NS), re-derived next to the values the modules use."""
    preds = held_out_predictions(rows)
    rho = np.array([r["issue_ms"] / (r["issue_ms"] + r["d_ms"] - p) for _, r, p in preds])
    print(f"\nband: rho = un-profiled / (profiled - predicted overhead), {len(rho)} held-out predictions "
          f"(LOWO + LOHO): 5/50/95% {np.round(np.quantile(rho, [0.05, 0.5, 0.95]), 3)} (issue 28's band; the range's "
          f"is the origin rows' own error, benchmarks/range_eval.py: {hostband.PACE_FAST}, {hostband.PACE_SLOW})")
    for fold in ("LOWO", "LOHO"):
        f = np.array([x for (fo, _, _), x in zip(preds, rho) if fo == fold])
        print(f"  {fold}: 5/50/95% {np.round(np.quantile(f, [0.05, 0.5, 0.95]), 3)}")
    for v in FIT_VARIANTS:
        f = np.array([x for (_, r, _), x in zip(preds, rho) if r["variant"] == v])
        print(f"  {v:11s} median |host error| {np.median(np.abs(1 / f - 1)) * 100:4.1f}%")
    noise = []
    calls = []
    for path in sorted(RESULTS.glob("*_overhead.jsonl")):
        recs = {(r["workload"], r["variant"]): r for r in map(json.loads, path.open())}
        for (w, v), r in recs.items():
            if v == "none":
                noise.append(r["steady_wall_ms"] / r["median_ms"])
            elif v == "e_cudaonly":
                n = r.get("n_cuda_runtime_per_step", 0) + r.get("n_cuda_driver_per_step", 0)
                if n:
                    calls.append((r["prof_issue_ms"] - recs[(w, "none")]["issue_ms"]) / n * 1e6)
    m_lo, m_hi = np.quantile(noise, [0.05, 0.95])
    c = np.array(calls)
    c_hi = c.mean() + 2 * c.std(ddof=1) / np.sqrt(len(c))
    print(f"  measured loop: steady / median over {len(noise)} runs, 5/95% {m_lo:.3f}, {m_hi:.3f} (module "
          f"{hostband.MEASURED_FAST}, {hostband.MEASURED_SLOW})")
    print(f"  per-call: CUDA-only profiling added {c.mean():.0f} +- {c.std(ddof=1) / np.sqrt(len(c)):.0f} ns per "
          f"runtime call over {len(c)} runs; mean + 2 s.e. {c_hi:.0f} ns (module {floors.CUPTI_CALL_MAX_NS})")


# ---------------------------------------------------------------- origin rows and pairs with ground truth
def ranged(catalog: object, trace: object, origin: object, target: object, host: pipeline.Host
           ) -> tuple[float, float, float, str]:
    """(central, low, high, range_source) of the iteration ms on ``target``: compare's row (pipeline.Run's
    headline: the host band's replays, the origin never below what the trace proves)."""
    h = A.replayed(catalog, trace, origin, target, host).headline
    return h.iteration_ms, h.iteration_low_ms, h.iteration_high_ms, h.range_source


def judged(row: dict, value: float, lo: float, hi: float, m: dict) -> None:
    med, steady = float(m["median_ms"]), float(m.get("steady_wall_ms") or m["median_ms"])
    row.update(measured_median_ms=med, measured_steady_ms=steady, error_pct=A.judged_error(value, med, steady),
               low_ms=lo, high_ms=hi, inside=max(lo, min(med, steady)) <= min(hi, max(med, steady)),
               launch_bound=float(m["trace_kernel_ms"]) < A.LAUNCH_BOUND_KERNEL_SHARE * (med + steady) / 2)


def traces_with_truth() -> list[tuple[str, Path, dict, str]]:
    """(set, folder, ground-truth row, recording option) of every trace scored: shared and collected traces
    (recorded with record_shapes) and the shared no_record_shapes twins, judged against the same loop."""
    out = []
    for label, folder in (("shared", SHARED), ("collected", COLLECTED)):
        if not (folder / "ground_truth.csv").exists():
            continue
        for r in csv.DictReader((folder / "ground_truth.csv").open()):
            out.append((label, folder, r, "record_shapes"))
            twin = Path(r["target"]) / "no_record_shapes" / Path(r["trace"]).name
            if (folder / twin).exists():
                out.append((label, folder, dict(r, trace=str(twin)), "no_record_shapes"))
    return out


def recording(trace: object, evidence: OH.Evidence) -> str:
    """The recording option a trace shows: record_shapes or not, + with_stack, + the hook's measured step."""
    out = "record_shapes" if evidence.record_shapes else "no_record_shapes"
    out += "+with_stack" if evidence.with_stack else ""
    return out + ("+hook" if pipeline.measured_step_ns(trace) is not None else "")


def origin_row(catalog: object, label: str, trace: object, r: dict) -> dict:
    """One origin row (compare's first row) judged against the measured loop ``r`` (ground_truth columns)."""
    origin = catalog.for_device(trace.device_name)  # type: ignore[attr-defined]
    central, lo, hi, source = ranged(catalog, trace, origin, origin, pipeline.Host())
    est = OH.estimate(trace, one_clock=True)
    fig = step_figures(trace.steps, trace.gpu).table  # type: ignore[attr-defined]
    keep = steady(fig["number"].to_numpy())  # without ProfilerSteps: the whole trace, its GPU span (figures.py)
    span = fig["cpu_ns" if len(trace.steps) else "gpu_span_ns"].to_numpy()[keep]  # type: ignore[attr-defined]
    share = est.per_step_ns[keep] / span if len(trace.steps) else np.zeros(1)  # type: ignore[attr-defined]
    row = dict(set=label, option=recording(trace, est.evidence), trace=r["trace"], origin=origin.name,
               profiled_ms=float(span.mean()) / 1e6, iteration_ms=central, range_source=source,
               busy_floor_ms=float(np.mean(est.floor.busy_ns)) / 1e6 if est.floor is not None and len(trace.steps)
               else 0.0,  # type: ignore[attr-defined]
               overhead_share=float(np.max(share)), u_ns=est.evidence.unit_ns,
               launch_us=est.evidence.launch_ns / 1e3, warnings=len(est.warnings))
    judged(row, central, lo, hi, r)
    return row


def origin_rows() -> list[dict]:
    catalog = load_catalog(A.SM_SPECS)
    return [origin_row(catalog, label, load(folder / r["trace"]), r) for label, folder, r, _ in traces_with_truth()]


def heldout_origin_rows(folders: list[Path], dist: list[tuple[Path, Path]]) -> list[dict]:
    """The held-out sets' origin rows, each trace as recorded and as a plain trace (the hook's measured step
    stripped, accuracy.load_for); a dist 'single' row's loop is its one median (no steady wall time)."""
    catalog = load_catalog(A.SM_SPECS)
    rows = []
    for folder in folders:
        for r in csv.DictReader((folder / "ground_truth.csv").open()):
            for label in (f"{folder.name}:heldout", f"{folder.name}:heldout-plain"):
                rows.append(origin_row(catalog, label, A.load_for(label, folder / r["trace"]), r))
    for jsonl, traces in dist:
        for rec in map(json.loads, jsonl.read_text().splitlines()):
            if rec.get("mode") != "single" or rec.get("status") != "ok":
                continue
            path = traces / rec["workload"] / "single" / "rank0.pt.trace.json.gz"
            trace = load(path)
            busy = step_figures(trace.steps, trace.gpu).mean_ms("gpu_busy_ns")
            r = dict(trace=str(path.relative_to(traces)), median_ms=rec["slowest_rank_ms"],
                     steady_wall_ms=rec["slowest_rank_ms"], trace_kernel_ms=busy)
            rows.append(origin_row(catalog, f"{jsonl.parent.name}:heldout-plain", trace, r))
    return rows


def pair_rows(heldout: Path | None = None) -> list[dict]:
    """accuracy.py's pairs of the shared and collected sets (with ``heldout``: only that set's, as recorded and as
    plain traces; scored, never fitted), each on the origin's host and host-matched."""
    catalog = load_catalog(A.SM_SPECS)
    rows = []
    sets = A.datasets(SHARED.parent.parent, heldout)
    for label, folder in [s for s in sets if s[0].startswith("heldout")] if heldout else sets:
        cache: dict[str, object] = {}
        for category, o, m in A.pairs(folder):
            trace = cache.get(o["trace"]) or cache.setdefault(o["trace"], A.load_for(label, folder / o["trace"]))
            origin, target = catalog.for_device(trace.device_name), catalog.resolve(A.target_name(m))
            speed = A.host_speed(trace, load(folder / m["trace"])) if category != "SM-scaled" else 1.0
            for matched in (False, True):
                if matched and speed == 1.0:
                    continue
                central, lo, hi, _ = ranged(catalog, trace, origin, target,
                                            pipeline.Host(cpu_speed=speed if matched else 1.0))
                row = dict(set=label, category=category, workload=o["workload"], origin=origin.name,
                           target=target.name, host="matched" if matched else "origin", iteration_ms=central)
                judged(row, central, lo, hi, m)
                rows.append(row)
    return rows


def _stats(rows: list[dict]) -> str:
    if not rows:
        return "- | - | - | -"
    e = np.abs([r["error_pct"] for r in rows])
    return (f"{len(rows)} | {e.mean():.1f}% | {np.median(e):.1f}% | "
            f"{100 * np.mean([bool(r['inside']) for r in rows]):.0f}%")


def summary(origins: list[dict], pairs: list[dict]) -> str:
    out = []
    if origins:
        out += ["| origin rows | traces | mean abs error | median | measured inside range |", "|---|---:|---:|---:|---:|"]
        labels = list(dict.fromkeys(r["set"] for r in origins))
        for label in labels + (["pooled"] if len(labels) > 1 else []):
            mine = [r for r in origins if label in ("pooled", r["set"])]
            for option in [None, *dict.fromkeys(r["option"] for r in mine)]:
                sel = [r for r in mine if option is None or r["option"] == option]
                name = f"{label}, {option or 'all'}"
                for bound, rows in (("", sel), (", launch-bound", [r for r in sel if r["launch_bound"]]),
                                    (", GPU-bound", [r for r in sel if not r["launch_bound"]])):
                    if rows:
                        out.append(f"| {name}{bound} | {_stats(rows)} |")
    if not pairs:
        return "\n".join(out) + "\n"
    out += ["", "| pairs (target iteration) | pairs | mean abs error | median | measured inside range |",
            "|---|---:|---:|---:|---:|"]
    for host in ("origin", "matched"):  # matched: every pair, at the target host's speed where the hosts differ
        by_pair = {(r["set"], r["category"], r["workload"], r["target"]): r for r in pairs
                   if r["host"] == "origin" or host == "matched"}  # a matched row replaces its origin-host row
        for cat in ("SM-scaled", "cross-GPU", "both", "all"):
            sel = [r for r in by_pair.values() if cat in ("all", r["category"])]
            lb = [r for r in sel if r["launch_bound"]]
            out += [f"| {host} host, {cat} | {_stats(sel)} |", f"| {host} host, {cat}, launch-bound | {_stats(lb)} |"]
    return "\n".join(out) + "\n"


def write(out: Path, name: str, rows: list[dict]) -> None:
    if rows:
        with (out / name).open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


def report_shapes_per_input(rows: list[dict]) -> None:
    """Is the shapes cost per recorded input rather than per op? Refit with the inputs per step (read from the
    kept variant-(a) trace; 0 without shapes) in place of the ops with shapes, and score it leave-one-workload-out."""
    inputs = {}
    for host, w in {(r["host"], r["workload"]) for r in rows}:
        t = load(ROOT / "benchmarks/traces/overhead" / host / f"{w}.pt.trace.json.gz")
        dims = t.ops.loc[t.ops["step"] >= 0, "input_dims"]
        inputs[(host, w)] = sum(len(d) for d in dims if d is not None) / max(len(t.steps), 1)
    alt = [dict(r, n_shapes_per_step=inputs[(r["host"], r["workload"])] * (r["variant"] != "b_noshapes"))
           for r in rows]
    for name, data in (("per op with shapes", rows), ("per recorded input", alt)):
        errs = []
        for w in sorted({r["workload"] for r in data}):
            k = fit([r for r in data if r["workload"] != w])
            test = [r for r in data if r["workload"] == w]
            errs += [abs(float(np.array(features(r)) @ k) - r["d_ms"]) / r["issue_ms"] for r in test]
        print(f"  shapes cost {name}: K {np.round(fit(data), 2)}, leave one workload out median |overhead error| "
              f"{np.median(errs) * 100:.1f}%, mean {np.mean(errs) * 100:.1f}%")


def report_twins() -> None:
    """The same loop recorded with and without record_shapes (../shared */no_record_shapes): the host's pace in
    each recording, read where the recording options add nothing measurable: the kernel-launch calls, and the main
    thread's time between its launches (forward pass and optimizer; autograd runs the backward on its own thread)."""
    for twin in sorted(SHARED.glob("*/no_record_shapes/*.json.gz")):
        pace = []
        for path in (twin.parent.parent / twin.name, twin):
            t = load(path)
            calls = t.calls[t.calls["name"].isin(OH.LAUNCH_CALLS) & (t.calls["step"] >= 0)]
            main_tid = t.ops.loc[t.ops["name"].str.startswith(OH.STEP_PREFIX), "tid"].iloc[0]
            fwd = calls[calls["tid"] == main_tid].sort_values("ts_ns")
            gap = np.median(np.diff(fwd["ts_ns"].to_numpy())) if len(fwd) > 1 else float("nan")
            pace.append((float(calls["dur_ns"].median()), float(gap)))
        (l1, g1), (l0, g0) = pace
        print(f"  twins {twin.parent.parent.name}/{twin.name}: with / without shapes, launch call p50 {l1 / 1e3:.1f} / "
              f"{l0 / 1e3:.1f} us ({l1 / l0:.2f}x), main-thread time between launches {g1 / 1e3:.1f} / {g0 / 1e3:.1f} us "
              f"({g1 / g0:.2f}x)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for origin_rows.csv, pairs_range.csv, range.md")
    ap.add_argument("--no-pairs", action="store_true", help="skip the target pairs (the slow part)")
    ap.add_argument("--heldout", type=Path, action="append", default=[],
                    help="score only held-out sets (repeatable): a folder of collect/heldout.py traces with the "
                    "ground_truth.csv collect/summarize.py merged; origin rows and pairs into *_heldout.csv and "
                    "range_heldout.md")
    ap.add_argument("--dist", type=Path, action="append", default=[],
                    help="held out too (repeatable): collect_distributed.py's folder (ground_truth.jsonl); its "
                    "'single' rows' traces under --dist-traces (default: DIR-x) as <workload>/single/rank0...")
    ap.add_argument("--dist-traces", type=Path, action="append", default=[])
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.heldout or a.dist:
        extracted = a.dist_traces or [d.parent / f"{d.name}-x" for d in a.dist]
        origins = heldout_origin_rows(a.heldout, [(d / "ground_truth.jsonl", x) for d, x in zip(a.dist, extracted)])
        pairs = [r for h in a.heldout for r in pair_rows(h)]
        md = summary(origins, [])
        for label in dict.fromkeys(r["set"] for r in pairs):
            md += f"\n## pairs, {label}\n\n" + summary([], [r for r in pairs if r["set"] == label])
        print(md)
        write(a.out, "origin_rows_heldout.csv", origins)
        write(a.out, "pairs_range_heldout.csv", pairs)
        (a.out / "range_heldout.md").write_text(md)
        return 0
    rows = device_rows()
    report_fit(rows)
    report_band(rows)
    report_shapes_per_input(rows)
    report_twins()
    origins = origin_rows()
    pairs = [] if a.no_pairs else pair_rows()
    md = summary(origins, pairs)
    print("\n" + md)
    write(a.out, "origin_rows.csv", origins)
    write(a.out, "pairs_range.csv", pairs)
    (a.out / "range.md").write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

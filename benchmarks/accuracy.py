"""Accuracy of `scale` on the shared traces: per-step GPU busy time (and span, via the replayed
timeline when emit is available) predicted from one trace against the measured trace of the same
workload on the target.

    python benchmarks/accuracy.py [--shared ../shared] [--out benchmarks/results]

Pairs: H100 -> H200 and H200 -> H100 (cross-GPU; compare GPU time only, the hosts differ), and
132 -> 64 SMs on each host (SM-scaled, same host; via benchmarks/specs_sm_limited.toml).
Writes accuracy.csv and accuracy.md; prints the table and the mean |error| per category.

Iteration time (issue 16): the prediction `compare` reports (pipeline.iteration_figures on the replayed target,
profiler overhead removed) against the target's measured iteration *without* the profiler: ground_truth.csv's
`median_ms` (synced iterations) and `steady_wall_ms` (back-to-back), two measurements of one loop; a prediction
between them is exact, else its error is the distance to the nearer one over their mean (`judged_error`). The
speed-up (origin iteration / target iteration) is judged the same way against median/median and steady/steady;
the origin row is the origin's own predicted iteration against its measurement. Launch-bound pairs: the target's
measured kernel time is under LAUNCH_BOUND_KERNEL_SHARE of its measured iteration.

The tool keeps the origin's host (its CPU) by default, but the cross-GPU and "both" pairs were measured on
another machine, whose CPU ran the same steps up to 2.3x faster. ``host_matched_*`` columns give what a user who
knows the target's host gets with ``--cpu-speed``: the ratio of the two hosts' trivial-op unit u (the overhead
model's measure of host speed, timeline/overhead.py), read from the two traces' cheapest recorded ops — host
evidence only, no GPU timing of the target.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from habitat_trace.timeline.steps import replayed_step_figures  # noqa: E402
from habitat_trace.ingest import load  # noqa: E402
from habitat_trace.ingest import schema as S  # noqa: E402
from habitat_trace import pipeline  # noqa: E402
from habitat_trace.timeline import overhead  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402
from habitat_trace.timeline.steps import step_figures  # noqa: E402

FULL_SMS = 132  # both lent GPUs (H100 SXM, H200) have 132 SMs
GPU_OF_DEVICE = {"NVIDIA H100 80GB HBM3": "H100", "NVIDIA H200": "H200"}  # catalog aliases
SM_SPECS = ROOT / "benchmarks" / "specs_sm_limited.toml"


def datasets(shared: Path, heldout: Path | None = None) -> list[tuple[str, Path]]:
    """(name, folder holding ground_truth.csv and the traces) for every set that is present. The held-out set
    (benchmarks/collect/heldout.py, recorded with our hook) is scored twice: "heldout" as recorded (the trace carries
    the origin's un-profiled step) and "heldout-plain" with that measurement stripped (a plain torch.profiler trace)."""
    sets = [("shared", shared / "data" / "traces"), ("collected", ROOT / "benchmarks" / "traces")]
    if heldout is not None:
        sets += [("heldout", heldout), ("heldout-plain", heldout)]
    return [(n, p) for n, p in sets if (p / "ground_truth.csv").exists()]


def load_for(dataset: str, path: Path):
    """The trace as the set scores it: "-plain" sets without the hook's measured un-profiled step."""
    trace = load(path)
    if dataset.endswith("-plain"):
        trace.meta.pop(S.UNPROFILED_STEP_KEY, None)
    return trace


def pairs(folder: Path) -> list[tuple[str, dict, dict]]:
    """(category, origin row, measured row): every full-SM trace against every other setting of the
    same workload. cross-GPU: H100 <-> H200 (GPU time only, the hosts differ); SM-scaled: the same
    host limited by a green context; both: another GPU and fewer SMs."""
    rows = list(csv.DictReader((folder / "ground_truth.csv").open()))
    by_workload: dict[str, list[dict]] = {}
    for r in rows:
        r["workload"] = r["workload"].removesuffix(f"_sm{r['sms']}")
        by_workload.setdefault(r["workload"], []).append(r)
    out = []
    for group in by_workload.values():
        for o in (r for r in group if int(r["sms"]) == FULL_SMS):
            for m in group:
                if m is o:
                    continue
                same_gpu = m["gpu"] == o["gpu"]
                full = int(m["sms"]) == FULL_SMS
                category = "cross-GPU" if full else ("SM-scaled" if same_gpu else "both")
                out.append((category, o, m))
    return out


def target_name(row: dict) -> str:
    gpu = GPU_OF_DEVICE[row["gpu"]]
    return gpu if int(row["sms"]) == FULL_SMS else f"{gpu}-SM{row['sms']}"


def predicted_figures(scaled):
    """Per-step busy time, span and CPU step time on the target, from the replayed timeline."""
    return scaled.step_figures().table


def replayed(catalog, trace, origin, target, host: pipeline.Host = pipeline.Host()) -> pipeline.RankReplay:
    """The trace on ``target`` by the path every command takes (pipeline.Run, one rank)."""
    return pipeline.Run([trace], pipeline.Options(catalog, origin=origin, host=host)).replay(target).ranks[0]


def run(shared: Path, only_sets: tuple[str, ...] = (), only_categories: tuple[str, ...] = (),
        heldout: Path | None = None) -> list[dict]:
    catalog = load_catalog(SM_SPECS)
    out = []
    for dataset, folder in datasets(shared, heldout):
        if only_sets and dataset not in only_sets:
            continue
        cache: dict[object, object] = {}
        for category, o, m in pairs(folder):
            if only_categories and category not in only_categories:
                continue
            trace = cache.get(o["trace"]) or cache.setdefault(o["trace"], load_for(dataset, folder / o["trace"]))
            measured = load_for(dataset, folder / m["trace"])
            origin = catalog.for_device(trace.device_name)
            target = catalog.resolve(target_name(m))
            scaled = replayed(catalog, trace, origin, target)
            same = cache.get(("identity", o["trace"])) or cache.setdefault(("identity", o["trace"]),
                                                                           replayed(catalog, trace, origin, origin))
            pred = scaled.prediction
            # trace against trace: the measured trace ran under the profiler too, so keep its overhead here
            profiled = replayed(catalog, trace, origin, target, pipeline.Host(keep_profiler_overhead=True))
            got = predicted_figures(profiled)
            want = step_figures(measured.steps, measured.gpu).table
            base = step_figures(trace.steps, trace.gpu).table
            row = {"dataset": dataset, "category": category, "workload": o["workload"], "origin": origin.name,
                   "target": target.name, "origin_busy_ms": base.gpu_busy_ns.mean() / 1e6,
                   "measured_busy_ms": want.gpu_busy_ns.mean() / 1e6,
                   "predicted_busy_ms": got.gpu_busy_ns.mean() / 1e6,
                   "measured_span_ms": want.gpu_span_ns.mean() / 1e6,
                   "predicted_span_ms": got.gpu_span_ns.mean() / 1e6,
                   "measured_cpu_step_ms": want.cpu_ns.mean() / 1e6, "predicted_cpu_step_ms": got.cpu_ns.mean() / 1e6,
                   "origin_bound": _bound(base), "measured_bound": _bound(want), "predicted_bound": _bound(got)}
            row.update(_class_times(trace, pred, measured))
            row.update(iteration_columns(same.headline.iteration_ms, scaled.headline.iteration_ms, o, m))
            # what compare reported before issue 16: the iteration with the profiler's overhead kept
            row["profiled_iteration_error_pct"] = judged_error(profiled.headline.iteration_ms, float(m["median_ms"]),
                                                               float(m["steady_wall_ms"]))
            speed = host_speed(trace, measured)
            matched = scaled if speed == 1.0 else replayed(catalog, trace, origin, target,
                                                           pipeline.Host(cpu_speed=speed))
            row["host_speed"] = speed
            row.update({f"host_matched_{k}": v for k, v in iteration_columns(
                same.headline.iteration_ms, matched.headline.iteration_ms, o, m).items()
                if k in ("predicted_iteration_ms", "iteration_error_pct", "predicted_speedup", "speedup_error_pct")})
            row["busy_error_pct"] = 100 * (row["predicted_busy_ms"] / row["measured_busy_ms"] - 1)
            row["identity_error_pct"] = 100 * (row["origin_busy_ms"] / row["measured_busy_ms"] - 1)
            row["span_error_pct"] = 100 * (row["predicted_span_ms"] / row["measured_span_ms"] - 1)
            out.append(row)
    return out


def _class_times(trace, pred, measured) -> dict:
    """Per kernel class: mean per-step kernel time predicted (origin's kernels) and measured (target's)."""
    out = {}
    g = trace.gpu.assign(pred=pred.dur_ns)
    g, m = g[g[S.STEP] >= 0], measured.gpu[measured.gpu[S.STEP] >= 0]
    p_cls = g.groupby(S.KCLASS)["pred"].sum() / max(len(trace.steps), 1)
    m_cls = m.groupby(S.KCLASS)[S.DUR].sum() / max(len(measured.steps), 1)
    for cls in sorted(set(p_cls.index) | set(m_cls.index)):
        out[f"class_{cls}_predicted_ms"] = float(p_cls.get(cls, 0.0)) / 1e6
        out[f"class_{cls}_measured_ms"] = float(m_cls.get(cls, 0.0)) / 1e6
    return out


def by_class(rows: list[dict]) -> str:
    """Time-weighted |error| of the per-step kernel time of each class, over all pairs."""
    classes = sorted({k.split("_")[1] for r in rows for k in r if k.startswith("class_")})
    out = ["| kernel class | pairs | measured ms (sum) | time-weighted abs error |", "|---|---:|---:|---:|"]
    for cls in classes:
        pairs = [(r.get(f"class_{cls}_predicted_ms", 0.0), r.get(f"class_{cls}_measured_ms", 0.0)) for r in rows]
        pairs = [(p, m) for p, m in pairs if m > 0]
        if not pairs:
            continue
        meas = sum(m for _, m in pairs)
        err = sum(abs(p - m) for p, m in pairs) / meas
        out.append(f"| {cls} | {len(pairs)} | {meas:.1f} | {100 * err:.1f}% |")
    return "\n".join(out) + "\n"


LAUNCH_BOUND_BUSY_FRACTION = 0.5  # a step whose GPU is busy less than half its span is launch-bound
LAUNCH_BOUND_KERNEL_SHARE = 0.7  # issue 16: a pair is launch-bound when kernels fill < 70% of the real iteration


def host_speed(origin: object, measured: object) -> float:
    """How much faster the measured trace's host ran than the origin's: the ratio of their trivial-op units u
    (overhead.estimate's evidence); 1.0 for the same host (an SM-scaled pair: one machine, one recording)."""
    u_o = overhead.estimate(origin).evidence.unit_ns
    u_m = overhead.estimate(measured).evidence.unit_ns
    same_host = getattr(origin, "device_name", None) == getattr(measured, "device_name", None)
    return 1.0 if same_host or u_m <= 0 else u_o / u_m


def judged_error(pred: float, a: float, b: float) -> float:
    """Signed % error of ``pred`` against two measurements of one quantity: 0 between them, else the distance
    to the nearer one over their mean."""
    lo, hi = min(a, b), max(a, b)
    if lo <= pred <= hi:
        return 0.0
    return 100 * (pred - (lo if pred < lo else hi)) / ((a + b) / 2)


def iteration_columns(origin_iter: float, target_iter: float, o: dict, m: dict) -> dict:
    """The iteration-time, speed-up and origin-row errors of one pair (module doc)."""
    om, os_, tm, ts = (float(o["median_ms"]), float(o["steady_wall_ms"]), float(m["median_ms"]),
                       float(m["steady_wall_ms"]))
    measured_iter = (tm + ts) / 2
    return {"predicted_iteration_ms": target_iter, "measured_median_ms": tm, "measured_steady_ms": ts,
            "iteration_error_pct": judged_error(target_iter, tm, ts),
            "origin_predicted_iteration_ms": origin_iter,
            "origin_error_pct": judged_error(origin_iter, om, os_),
            "predicted_speedup": origin_iter / target_iter,
            "speedup_error_pct": judged_error(origin_iter / target_iter, om / tm, os_ / ts),
            "launch_bound": float(m["trace_kernel_ms"]) < LAUNCH_BOUND_KERNEL_SHARE * measured_iter}


def repeatability(folder: Path) -> str:
    """How well the real loop repeats on one machine: the hook's un-profiled wait steps (recorded in the same
    process a minute after median_ms and steady_wall_ms were taken) judged against those two by the same rule as a
    prediction (``judged_error``). It is the error of a perfect origin-row prediction, the floor under every
    iteration-time figure here. Only CPU-bound steps (wait steps > 1.05 x the trace's kernel time: a GPU-bound
    step's wait steps time the host running ahead)."""
    errs = []
    for r in csv.DictReader((folder / "ground_truth.csv").open()):
        steps = load(folder / r["trace"]).meta.get(S.UNPROFILED_STEP_KEY)
        if not steps:
            continue
        hook = sorted(steps)[len(steps) // 2] / 1e6
        if hook > 1.05 * float(r["trace_kernel_ms"]):
            errs.append(abs(judged_error(hook, float(r["median_ms"]), float(r["steady_wall_ms"]))))
    if not errs:
        return ""
    errs.sort()
    return (f"Repeatability of the real loop (hook's wait steps vs median/steady of the same process, CPU-bound "
            f"steps): {len(errs)} traces, mean {sum(errs) / len(errs):.1f}%, median {errs[len(errs) // 2]:.1f}%, "
            f"worst {errs[-1]:.1f}%\n")


def _bound(fig) -> str:
    busy, span = fig.gpu_busy_ns.mean(), fig.gpu_span_ns.mean()
    return "launch" if busy < LAUNCH_BOUND_BUSY_FRACTION * span else "gpu"


def markdown(rows: list[dict]) -> str:
    out = ["| set | category | workload | origin → target | measured busy ms | predicted | error | identity error |"
           " measured span ms | predicted span | span error | measured iteration ms (median, steady) |"
           " predicted iteration | iteration error | speed-up error |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['dataset']} | {r['category']} | {r['workload']} | {r['origin']} → {r['target']} | "
                   f"{r['measured_busy_ms']:.2f} | {r['predicted_busy_ms']:.2f} | {r['busy_error_pct']:+.1f}% | "
                   f"{r['identity_error_pct']:+.1f}% | {r['measured_span_ms']:.2f} | {r['predicted_span_ms']:.2f} | "
                   f"{r['span_error_pct']:+.1f}% | {r['measured_median_ms']:.2f}, {r['measured_steady_ms']:.2f} | "
                   f"{r['predicted_iteration_ms']:.2f} | {r['iteration_error_pct']:+.1f}% | "
                   f"{r['speedup_error_pct']:+.1f}% |")
    out.append("")
    return summary(rows) + "\n" + iteration_summary(rows) + "\n" + by_class(rows) + "\n" + "\n".join(out) + "\n"


def summary(rows: list[dict]) -> str:
    """Mean and worst |error| per dataset and category (the README's table)."""
    out = ["| set | category | pairs | mean abs busy error | worst busy error | mean abs identity error |"
           " mean abs span error |", "|---|---|---:|---:|---:|---:|---:|"]
    keys = sorted({(r["dataset"], r["category"]) for r in rows}) + [("all", "all")]
    for ds, cat in keys:
        sel = [r for r in rows if ds in ("all", r["dataset"]) and cat in ("all", r["category"])]
        b = [abs(r["busy_error_pct"]) for r in sel]
        i = [abs(r["identity_error_pct"]) for r in sel]
        sp = [abs(r["span_error_pct"]) for r in sel]
        out.append(f"| {ds} | {cat} | {len(sel)} | {sum(b) / len(b):.1f}% | {max(b):.1f}% | {sum(i) / len(i):.1f}% |"
                   f" {sum(sp) / len(sp):.1f}% |")
    return "\n".join(out) + "\n"


def _mean_abs(rows: list[dict], key: str) -> str:
    v = [abs(r[key]) for r in rows]
    return f"{sum(v) / len(v):.1f}%" if v else "-"


def iteration_summary(rows: list[dict]) -> str:
    """Issue 16's figures: iteration time against the real (un-profiled) loop, speed-up, origin row."""
    out = ["| set | category | pairs | launch-bound | mean abs iteration error | on launch-bound pairs |"
           " mean abs speed-up error | mean abs origin-row error | host-matched iteration error |"
           " on launch-bound pairs | host-matched speed-up error |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    keys = sorted({(r["dataset"], r["category"]) for r in rows}) + [("all", "all")]
    for ds, cat in keys:
        sel = [r for r in rows if ds in ("all", r["dataset"]) and cat in ("all", r["category"])]
        lb = [r for r in sel if str(r["launch_bound"]) == "True"]  # a bool here, a string read back from the CSV
        out.append(f"| {ds} | {cat} | {len(sel)} | {len(lb)} | {_mean_abs(sel, 'iteration_error_pct')} | "
                   f"{_mean_abs(lb, 'iteration_error_pct')} | {_mean_abs(sel, 'speedup_error_pct')} | "
                   f"{_mean_abs(sel, 'origin_error_pct')} | {_mean_abs(sel, 'host_matched_iteration_error_pct')} | "
                   f"{_mean_abs(lb, 'host_matched_iteration_error_pct')} | "
                   f"{_mean_abs(sel, 'host_matched_speedup_error_pct')} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--heldout", type=Path, help="folder of held-out traces + ground_truth.csv (collect/heldout.py)")
    ap.add_argument("--only", default="", help="comma-separated sets to score (default: every set present)")
    ap.add_argument("--name", default="accuracy", help="output base name: NAME.csv and NAME.md in --out")
    a = ap.parse_args()
    rows = run(a.shared, tuple(x for x in a.only.split(",") if x), heldout=a.heldout)
    a.out.mkdir(parents=True, exist_ok=True)
    with (a.out / f"{a.name}.csv").open("w", newline="") as f:
        fields = list(dict.fromkeys(k for r in rows for k in r))  # union, first-seen order
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)
    md = markdown(rows)
    if a.heldout is not None:
        md = repeatability(a.heldout) + "\n" + md
    (a.out / f"{a.name}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

"""Accuracy of `scale` on the shared traces: per-step GPU busy time (and span, via the replayed
timeline when emit is available) predicted from one trace against the measured trace of the same
workload on the target.

    python benchmarks/accuracy.py [--shared ../shared] [--out benchmarks/results]

Pairs: H100 -> H200 and H200 -> H100 (cross-GPU; compare GPU time only, the hosts differ), and
132 -> 64 SMs on each host (SM-scaled, same host; via benchmarks/specs_sm_limited.toml).
Writes accuracy.csv and accuracy.md; prints the table and the mean |error| per category.
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
from habitat_trace.scale.specs import load_catalog  # noqa: E402
from habitat_trace.timeline.steps import step_figures  # noqa: E402

FULL_SMS = 132  # both lent GPUs (H100 SXM, H200) have 132 SMs
GPU_OF_DEVICE = {"NVIDIA H100 80GB HBM3": "H100", "NVIDIA H200": "H200"}  # catalog aliases
SM_SPECS = ROOT / "benchmarks" / "specs_sm_limited.toml"


def datasets(shared: Path) -> list[tuple[str, Path]]:
    """(name, folder holding ground_truth.csv and the traces) for every set that is present."""
    sets = [("shared", shared / "data" / "traces"), ("collected", ROOT / "benchmarks" / "traces")]
    return [(n, p) for n, p in sets if (p / "ground_truth.csv").exists()]


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


def run(shared: Path, only_sets: tuple[str, ...] = (), only_categories: tuple[str, ...] = ()) -> list[dict]:
    catalog = load_catalog(SM_SPECS)
    out = []
    for dataset, folder in datasets(shared):
        if only_sets and dataset not in only_sets:
            continue
        cache: dict[str, object] = {}
        for category, o, m in pairs(folder):
            if only_categories and category not in only_categories:
                continue
            trace = cache.get(o["trace"]) or cache.setdefault(o["trace"], load(folder / o["trace"]))
            measured = load(folder / m["trace"])
            origin = catalog.for_device(trace.device_name)
            target = catalog.resolve(target_name(m))
            scaled = pipeline.scale(trace, origin, target)
            pred = scaled.prediction
            got = predicted_figures(scaled)
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


def _bound(fig) -> str:
    busy, span = fig.gpu_busy_ns.mean(), fig.gpu_span_ns.mean()
    return "launch" if busy < LAUNCH_BOUND_BUSY_FRACTION * span else "gpu"


def markdown(rows: list[dict]) -> str:
    out = ["| set | category | workload | origin → target | measured busy ms | predicted | error | identity error |"
           " measured span ms | predicted span | span error |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['dataset']} | {r['category']} | {r['workload']} | {r['origin']} → {r['target']} | "
                   f"{r['measured_busy_ms']:.2f} | {r['predicted_busy_ms']:.2f} | {r['busy_error_pct']:+.1f}% | "
                   f"{r['identity_error_pct']:+.1f}% | {r['measured_span_ms']:.2f} | {r['predicted_span_ms']:.2f} | "
                   f"{r['span_error_pct']:+.1f}% |")
    out.append("")
    return summary(rows) + "\n" + by_class(rows) + "\n" + "\n".join(out) + "\n"


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = ap.parse_args()
    rows = run(a.shared)
    a.out.mkdir(parents=True, exist_ok=True)
    with (a.out / "accuracy.csv").open("w", newline="") as f:
        fields = list(dict.fromkeys(k for r in rows for k in r))  # union, first-seen order
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)
    md = markdown(rows)
    (a.out / "accuracy.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

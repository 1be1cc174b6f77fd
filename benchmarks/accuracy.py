"""Accuracy of `scale` on the shared traces: per-step GPU busy time (and span, via the replayed
timeline when emit is available) predicted from one trace against the measured trace of the same
workload on the target.

    python benchmarks/accuracy.py [--shared ../shared] [--out benchmarks/results]

Pairs: H100 -> H200 and H200 -> H100 (cross-GPU; compare GPU time only, the hosts differ), and
132 -> 64 SMs on each host (SM-scaled, same host; via benchmarks/specs_sm64.toml).
Writes accuracy.csv and accuracy.md; prints the table and the mean |error| per category.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from habitat_trace.ingest import load  # noqa: E402
from habitat_trace.scale.engine import predict  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402
from habitat_trace.summary import step_figures  # noqa: E402

PAIRS = (  # (category, origin dir, target dir, target GPU name, target file suffix)
    ("cross-GPU", "h100-sxm", "h200-sxm", "H200", ""),
    ("cross-GPU", "h200-sxm", "h100-sxm", "H100", ""),
    ("SM-scaled", "h100-sxm", "h100-sxm-sm64", "H100-SM64", "_sm64"),
    ("SM-scaled", "h200-sxm", "h200-sxm-sm64", "H200-SM64", "_sm64"),
)


def predicted_figures(trace, pred):
    """Per-step busy time and span on the target: from the replayed timeline when emit exists,
    else busy scaled by the step's predicted/origin kernel-time ratio (span scaled likewise)."""
    try:
        from habitat_trace.emit.replay import replay, step_figures_of
    except ImportError:
        fig = step_figures(trace.steps, trace.gpu).table.copy()
        g = trace.gpu.assign(pred=pred.dur_ns)
        ratio = g[g.step >= 0].groupby("step").apply(lambda x: x.pred.sum() / max(x.dur_ns.sum(), 1))
        fig["gpu_busy_ns"] = fig["gpu_busy_ns"] * fig["step"].map(ratio)
        fig["gpu_span_ns"] = float("nan")
        return fig
    return step_figures_of(trace, replay(trace, pred)).table


def run(shared: Path) -> list[dict]:
    traces = shared / "data" / "traces"
    catalog = load_catalog(ROOT / "benchmarks" / "specs_sm64.toml")
    rows = []
    for category, src, dst, target_name, suffix in PAIRS:
        for path in sorted((traces / src).glob("*.pt.trace.json.gz")):
            workload = path.name.split(".pt.trace")[0]
            measured_path = traces / dst / f"{workload}{suffix}.pt.trace.json.gz"
            if not measured_path.exists():
                continue
            trace, measured = load(path), load(measured_path)
            origin = catalog.for_device(trace.device_name)
            target = catalog.resolve(target_name)
            pred = predict(trace, origin, target)
            got = predicted_figures(trace, pred)
            want = step_figures(measured.steps, measured.gpu).table
            base = step_figures(trace.steps, trace.gpu).table
            row = {"category": category, "workload": workload, "origin": origin.name, "target": target.name,
                   "origin_busy_ms": base.gpu_busy_ns.mean() / 1e6,
                   "measured_busy_ms": want.gpu_busy_ns.mean() / 1e6,
                   "predicted_busy_ms": got.gpu_busy_ns.mean() / 1e6,
                   "measured_span_ms": want.gpu_span_ns.mean() / 1e6,
                   "predicted_span_ms": got.gpu_span_ns.mean() / 1e6}
            row["busy_error_pct"] = 100 * (row["predicted_busy_ms"] / row["measured_busy_ms"] - 1)
            row["identity_error_pct"] = 100 * (row["origin_busy_ms"] / row["measured_busy_ms"] - 1)
            row["span_error_pct"] = 100 * (row["predicted_span_ms"] / row["measured_span_ms"] - 1)
            rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| category | workload | origin → target | measured busy ms | predicted | error | identity error |"
           " measured span ms | predicted span | span error |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['category']} | {r['workload']} | {r['origin']} → {r['target']} | "
                   f"{r['measured_busy_ms']:.2f} | {r['predicted_busy_ms']:.2f} | {r['busy_error_pct']:+.1f}% | "
                   f"{r['identity_error_pct']:+.1f}% | {r['measured_span_ms']:.2f} | {r['predicted_span_ms']:.2f} | "
                   f"{r['span_error_pct']:+.1f}% |")
    out.append("")
    out.append("| category | pairs | mean abs busy error | worst | mean abs span error |")
    out.append("|---|---:|---:|---:|---:|")
    for cat in sorted({r["category"] for r in rows}) + ["all"]:
        sel = [r for r in rows if cat in ("all", r["category"])]
        b = [abs(r["busy_error_pct"]) for r in sel]
        s = [abs(r["span_error_pct"]) for r in sel]
        out.append(f"| {cat} | {len(sel)} | {sum(b) / len(b):.1f}% | {max(b):.1f}% | {sum(s) / len(s):.1f}% |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = ap.parse_args()
    rows = run(a.shared)
    a.out.mkdir(parents=True, exist_ok=True)
    with (a.out / "accuracy.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    md = markdown(rows)
    (a.out / "accuracy.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

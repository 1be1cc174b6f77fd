"""Merge the collector's run folders into benchmarks/traces/: traces copied per target, one ground_truth.csv.

    python benchmarks/collect/summarize.py runs/h100 runs/h100-sm48 runs/h200 ... [--traces benchmarks/traces]

Each run folder holds ground_truth.jsonl and the gzipped traces collect_traces.py wrote. The CSV has the
columns of ../shared/data/traces/ground_truth.csv; the trace_* figures are computed from the trace itself
with habitat_trace (per-step means of GPU busy time, GPU span and CPU step time).
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from habitat_trace.ingest import load  # noqa: E402
from habitat_trace.timeline.steps import step_figures  # noqa: E402

COLUMNS = ["workload", "target", "gpu", "sms", "trace", "median_ms", "p10_ms", "p90_ms", "steady_wall_ms",
           "trace_kernel_ms", "trace_gpu_span_ms", "trace_cpu_step_ms", "trace_steps"]
# Device names as torch reports them -> the target folder names used in ../shared/data/traces.
KNOWN_TARGETS = {"NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA H200": "h200-sxm"}


def target_of(rec: dict[str, Any]) -> str:
    base = KNOWN_TARGETS.get(rec["gpu"]) or re.sub(r"[^a-z0-9]+", "-", rec["gpu"].lower().replace("nvidia", "")).strip("-")
    return base if int(rec["sms"]) == int(rec.get("full_sms", rec["sms"])) else f"{base}-sm{rec['sms']}"


def row_of(rec: dict[str, Any], run_dir: Path, traces: Path) -> dict[str, Any]:
    target = target_of(rec)
    dest = traces / target / rec["trace"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    if (run_dir / rec["trace"]).resolve() != dest.resolve():
        shutil.copyfile(run_dir / rec["trace"], dest)
    trace = load(dest)
    fig = step_figures(trace.steps, trace.gpu)
    return dict(workload=rec["workload"], target=target, gpu=rec["gpu"], sms=rec["sms"],
                trace=f"{target}/{rec['trace']}",
                **{k: round(float(rec[k]), 3) for k in ("median_ms", "p10_ms", "p90_ms", "steady_wall_ms")},
                trace_kernel_ms=round(fig.mean_ms("gpu_busy_ns"), 3),
                trace_gpu_span_ms=round(fig.mean_ms("gpu_span_ns"), 3),
                trace_cpu_step_ms=round(fig.mean_ms("cpu_ns"), 3), trace_steps=len(fig.table))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run folders written by collect_traces.py --out")
    ap.add_argument("--traces", type=Path, default=ROOT / "benchmarks" / "traces")
    a = ap.parse_args(argv)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for run_dir in a.runs:
        for line in (run_dir / "ground_truth.jsonl").read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                row = row_of(rec, run_dir, a.traces)
                rows[(row["target"], row["workload"])] = row  # a later run of the same pair wins
                print(f"{row['target']:>16} {row['workload']:<40} median {row['median_ms']:8.3f} ms", flush=True)
    a.traces.mkdir(parents=True, exist_ok=True)
    with (a.traces / "ground_truth.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows[k] for k in sorted(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

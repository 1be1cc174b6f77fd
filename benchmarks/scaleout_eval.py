"""Issue 27's validation: from a folder collect_distributed.py wrote (ground_truth.jsonl and one tar of traces per
workload), for every workload and strategy (ddp, fsdp) with N ranks measured:

(a) scale-out: the N-rank step predicted from the ONE-GPU trace (timeline/scaleout.py on the origin GPU) against
    the measured N-rank step (the slowest rank's median, no profiler);
(b) joint replay: the N rank traces replayed together (timeline/joint.py, each rank's profiler overhead removed)
    against the same measurement.

    python benchmarks/scaleout_eval.py runs/h200x2 [--out benchmarks/results/scaleout/h200x2.md]

Writes a markdown table (and a .csv beside it) with, per row: the measured one-GPU and N-rank steps, both
predictions and their errors, and the baseline of predicting no change from one GPU; a summary line per method
(mean absolute and worst error) against the issue's bars (ERROR_BAR_SCALEOUT, ERROR_BAR_JOINT).
"""
from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Optional

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from habitat_trace.ingest.trace import load  # noqa: E402
from habitat_trace.pipeline import DataParallel, Options, Run, iteration_figures  # noqa: E402

# The acceptance bars: scale-out from one GPU within 10% of the measured N-rank step, the joint replay of the
# measured ranks within 5% (issue 27, "Done when").
ERROR_BAR_SCALEOUT = 0.10
ERROR_BAR_JOINT = 0.05
STRATEGIES = ("ddp", "fsdp")


def rows_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "ground_truth.jsonl").read_text().splitlines() if line.strip()]


def extract(folder: Path, into: Path) -> None:
    for tar in sorted(folder.glob("*.tar")):
        with tarfile.open(tar) as t:
            t.extractall(into, filter="data")


def predicted_scaleout(single: Path, world: int, strategy: str) -> tuple[float, float, list[str]]:
    """(one-GPU replayed iteration, N-rank predicted iteration, warnings) in ms, on the origin GPU: what
    ``compare TRACE --world-size N --strategy S`` reports on its origin row."""
    alone = Run.open(single, Options.load()).baseline().ranks[0]
    many = Run.open(single, Options.load(data_parallel=DataParallel(world, strategy))).baseline()
    return iteration_figures(alone.tables, alone.timeline)[0], many.ranks[0].headline.iteration_ms, list(many.warnings)


def joint(rank_files: list[Path]) -> float:
    """The slowest rank's iteration (ms) of the ranks replayed together on their own GPU (``compare DIR``'s origin)."""
    traces = sorted((load(p) for p in rank_files), key=lambda t: t.distributed.rank if t.distributed else 0)
    replay = Run(traces, Options.load()).baseline()
    return max(iteration_figures(r.tables, r.timeline)[0] for r in replay.ranks)


def evaluate(folder: Path) -> pd.DataFrame:
    rows = rows_of(folder)
    by = {(r["workload"], r["mode"]): r for r in rows}
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        extract(folder, Path(tmp))
        for (name, mode), r in by.items():
            single = by.get((name, "single"))
            if mode not in STRATEGIES or r["status"] != "ok" or single is None or single["status"] != "ok":
                continue
            base = Path(tmp) / name
            one_pred, pred, warn = predicted_scaleout(base / "single" / "rank0.pt.trace.json.gz", r["world"], mode)
            jt = joint(sorted((base / mode).glob("rank*.pt.trace.json.gz")))
            meas, meas1 = float(r["slowest_rank_ms"]), float(single["slowest_rank_ms"])
            out.append({"workload": name, "strategy": mode, "world": r["world"], "device": r["device"],
                        "measured_1gpu_ms": meas1, "replayed_1gpu_ms": one_pred, "measured_ms": meas,
                        "scaleout_ms": pred, "scaleout_err": pred / meas - 1, "joint_ms": jt, "joint_err": jt / meas - 1,
                        "no_change_err": meas1 / meas - 1, "warnings": "; ".join(warn)})
    return pd.DataFrame(out)


def summary(df: pd.DataFrame) -> list[str]:
    lines = []
    for col, bar, what in (("scaleout_err", ERROR_BAR_SCALEOUT, "scale-out from one GPU"),
                           ("joint_err", ERROR_BAR_JOINT, "joint replay of the ranks"),
                           ("no_change_err", None, "baseline: the one-GPU step")):
        err = df[col].abs()
        within = "" if bar is None else f", within {bar:.0%}: {int((err <= bar).sum())}/{len(err)}"
        lines.append(f"- {what}: mean |error| {err.mean():.1%}, worst {err.max():.1%}{within}")
    return lines


def markdown(df: pd.DataFrame, folder: Path) -> str:
    cols = ["workload", "strategy", "world", "measured_1gpu_ms", "measured_ms", "scaleout_ms", "scaleout_err",
            "joint_ms", "joint_err", "no_change_err"]
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    body = ""
    for r in df[cols].itertuples(index=False):
        cells = [f"{v:+.1%}" if c.endswith("_err") else f"{v:.2f}" if isinstance(v, float) else str(v)
                 for c, v in zip(cols, r)]
        body += "| " + " | ".join(cells) + " |\n"
    device = df["device"].iat[0] if len(df) else "?"
    return (f"# Scale-out validation: {folder.name} ({device})\n\n{head}{body}\n" + "\n".join(summary(df)) + "\n")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--out", type=Path, help="markdown file (default: benchmarks/results/scaleout/<folder>.md)")
    args = p.parse_args(argv)
    df = evaluate(args.folder)
    if not len(df):
        print(f"{args.folder}: no workload with a one-GPU and an N-rank measurement", file=sys.stderr)
        return 1
    out = args.out or Path(__file__).resolve().parent / "results" / "scaleout" / f"{args.folder.name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown(df, args.folder))
    df.to_csv(out.with_suffix(".csv"), index=False)
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Scale-out from a one-GPU trace recorded on another host and day (issue 31, 2026-12-06): every N-rank step the
twenty-six H100 sessions measured (benchmarks/results/scaleout/ground_truth/<run>/ground_truth.jsonl, 2026-11-26..28)
predicted from ONE collection of one-GPU traces (collect_distributed.py --modes single on one lent H100), as a user
who profiled on their own GPU and rents N of them elsewhere would run it:

    python benchmarks/scaleout_crosshost.py DIR [--out benchmarks/results/scaleout/crosshost-20261206]

Per row (scaleout_eval.evaluate with ``singles_from``, scale-out only: the sessions' rank traces are not kept):
- ``scaleout_err``: ``compare TRACE --world-size N --strategy S`` on the new trace against the session's measured
  N-rank step (the other host's pace included: what the user sees);
- ``anchored_err``: the same given the session's own measured one-GPU step (``--measured-step``): the N-GPU model's
  error with the two hosts' pace taken out (h100x4-fsdp1-20261126 recorded no one-GPU step of its own: the new
  collection's stands in, as scaleout_eval.evaluate does);
- beside them, each session's own figures (its CSV: the scale-out from the trace it recorded) and two no-change
  baselines: the session's one-GPU step and the new collection's.
Writes OUT.md and OUT.csv (one row per session row).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import readme_figures  # noqa: E402
import scaleout_eval as E  # noqa: E402

RESULTS = HERE / "results" / "scaleout"
KEY = ["run", "workload", "strategy", "world"]


def evaluate(singles: Path, runs: tuple[str, ...] = readme_figures.SCALEOUT_RUNS,
             results: Path = RESULTS) -> pd.DataFrame:
    """Every ok row of ``runs`` predicted from the one-GPU traces under ``singles``, joined to the session's own CSV
    (``results``/<run>.csv beside ``results``/ground_truth/<run>/ground_truth.jsonl)."""
    today = {r["workload"]: float(r["slowest_rank_ms"]) for r in E.rows_of(singles) if r["status"] == "ok"}
    out = []
    for run in runs:
        new = E.evaluate(results / "ground_truth" / run, scaleout_only=True, singles_from=singles).assign(run=run)
        old = pd.read_csv(results / f"{run}.csv").assign(run=run)
        cols = KEY + ["scaleout_err", "anchored_err", "in_range"]
        out.append(new[new["status"] == "ok"].merge(old[old["status"] == "ok"][cols], on=KEY,
                                                     suffixes=("", "_session")))
    df = pd.concat(out, ignore_index=True)
    df["new_1gpu_ms"] = df["workload"].map(today)
    df["no_change_new_err"] = df["new_1gpu_ms"] / df["measured_ms"] - 1
    return df


def pct(s: pd.Series) -> str:
    return f"{100 * s.abs().mean():.1f}% (bias {100 * s.mean():+.1f}%)"


def markdown(df: pd.DataFrame, singles: Path) -> str:
    meta = json.loads((singles / "ground_truth.jsonl").read_text().splitlines()[0])
    inside = df["in_range"].astype(bool)
    lines = [f"# Scale-out from one-GPU traces of another host (benchmarks/scaleout_crosshost.py)\n",
             f"One-GPU traces: `{singles.name}` ({meta['device']}, torch {meta['torch']}, {meta['utc'][:16]} UTC), "
             f"against the measured N-rank steps of the {df['run'].nunique()} tables of twenty-six H100 host sessions "
             "(2026-11-26..28; h100x4-fsdp1 is a second collection on h100x4's host). Error: predicted / measured "
             "- 1.\n",
             "| | rows | scale-out from the new trace | given the session's one-GPU step | the session's own trace "
             "(its table: the model of its day) | no change (session's one GPU) | no change (new one GPU) |",
             "|---|---:|---:|---:|---:|---:|---:|"]

    def row(name: str, q: pd.DataFrame) -> str:
        return (f"| {name} | {len(q)} | {pct(q['scaleout_err'])} | {pct(q['anchored_err'])} | "
                f"{pct(q['scaleout_err_session'])} | {pct(q['no_change_err'])} | {pct(q['no_change_new_err'])} |")

    for (s, w), q in df.groupby(["strategy", "world"]):
        lines.append(row(f"{s} x{w}", q))
    lines.append(row("all", df))
    worse = df.groupby("workload")[["scaleout_err", "no_change_new_err"]].apply(lambda q: q.abs().mean())
    worse = worse[worse["scaleout_err"] > worse["no_change_new_err"]]
    host = df.drop_duplicates(["run", "workload"])
    lines += ["", f"- inside the new prediction's range: {int(inside.sum())} of {len(df)} "
                  f"({100 * inside.mean():.0f}%); within 10%: {int((df['scaleout_err'].abs() <= 0.10).sum())}",
              f"- the new one-GPU step against each session's: mean |ratio - 1| "
              f"{pct(host['new_1gpu_ms'] / host['measured_1gpu_ms'] - 1)} over {len(host)} (session, workload)",
              f"- workloads whose scale-out is worse than no change on average: "
              f"{', '.join(worse.index) or 'none'} (of {df['workload'].nunique()})", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("singles", type=Path, help="a collect_distributed.py --modes single folder, traces/ extracted")
    p.add_argument("--out", type=Path, default=RESULTS / "crosshost-20261206")
    a = p.parse_args(argv)
    df = evaluate(a.singles)
    text = markdown(df, a.singles)
    a.out.with_suffix(".md").write_text(text)
    df.to_csv(a.out.with_suffix(".csv"), index=False)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

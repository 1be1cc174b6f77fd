"""How fast each rank's host ran against the one-GPU run's host of the same session, and how much of the scale-out's
error that explains (issue 31: "what stands in the way").

    python benchmarks/host_pace_eval.py RUN [RUN ...] [--out benchmarks/results/scaleout/host_pace.md]

RUN: a folder collect_distributed.py wrote (traces unpacked under RUN/traces/<workload>/{single,<mode>-w<N>}/) whose
scale-out table benchmarks/results/scaleout/<RUN name>-*.csv scored (the newest of them). The host pace of a rank
trace is the one-GPU trace's aten ops re-timed at the rank's per-op medians: sum over the op names both traces ran
of (the one-GPU trace's count x the rank's median duration) over (the same count x the one-GPU trace's median),
ops shorter than 2 ms inside the ProfilerSteps (an op's CPU time: its dispatch and Python around it, not the GPU's).
Both traces are profiled the same way (collect_distributed.py: one schedule, one process per GPU), so the ratio is
the host's pace between the two runs, minutes apart on one machine, not the profiler's overhead. A ratio of 1 means
the ranks' hosts dispatched as fast as the one-GPU run's; the scale-out from the one-GPU trace assumes exactly that.

Reported: per row the ranks' median pace, the correlation of log(pace) with the scale-out's signed error, and the
mean |error| of the rows whose hosts ran within PACE_BAND of the one-GPU run against the rest.
"""
from __future__ import annotations

import argparse
import collections
import glob
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import orjson
import pandas as pd

RESULTS = Path(__file__).resolve().parent / "results" / "scaleout"
MAX_OP_US = 2000.0  # longer ops hold waits (a sync, a blocking copy): not the host's dispatch pace
PACE_BAND = 0.10  # |log pace| below this: the ranks' host within ~10% of the one-GPU run's


def op_medians(path: Path) -> dict[str, tuple[int, float]]:
    """Per aten op name inside the trace's ProfilerSteps: (count, median duration us), ops under MAX_OP_US."""
    events = orjson.loads(path.read_bytes())["traceEvents"]
    steps = [e for e in events if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")]
    if not steps:
        return {}
    lo, hi = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)
    durs: dict[str, list[float]] = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op" and lo <= e["ts"] < hi and e["name"].startswith("aten::") and \
                e.get("dur", 0) < MAX_OP_US:
            durs[e["name"]].append(e["dur"])
    return {k: (len(v), float(np.median(v))) for k, v in durs.items()}


def pace(rank: dict[str, tuple[int, float]], single: dict[str, tuple[int, float]]) -> float:
    """The one-GPU trace's op mix timed at the rank's medians over at its own (module doc); NaN without common ops."""
    common = [k for k in single if k in rank]
    den = sum(single[k][0] * single[k][1] for k in common)
    return sum(single[k][0] * rank[k][1] for k in common) / den if den > 0 else float("nan")


def session_paces(run: Path) -> pd.DataFrame:
    """One row per (workload, strategy, world): the ranks' paces, their median and maximum."""
    rows = []
    for wdir in sorted((run / "traces").iterdir()):
        single_path = wdir / "single" / "rank0.pt.trace.json"
        if not single_path.exists():
            continue
        single = op_medians(single_path)
        for mdir in sorted(wdir.glob("*-w*")):
            mode, world = mdir.name.split("-w")
            paces = [pace(op_medians(Path(p)), single) for p in sorted(glob.glob(str(mdir / "rank*.pt.trace.json")))]
            rows.append(dict(host=run.name, workload=wdir.name, strategy=mode, world=int(world),
                             pace_ranks=" ".join(f"{p:.2f}" for p in paces), pace_median=float(np.median(paces)),
                             pace_max=float(np.max(paces))))
    return pd.DataFrame(rows)


def scored(run: Path) -> Optional[pd.DataFrame]:
    """The newest scale-out table of the session (scaleout_eval.py's CSV), None without one."""
    tables = sorted(RESULTS.glob(f"{run.name}-*.csv"))
    return pd.read_csv(tables[-1]) if tables else None


def summary(rows: pd.DataFrame) -> list[str]:
    """The correlation and the split by PACE_BAND (module doc), as markdown lines."""
    logp = np.log(rows["pace_median"].to_numpy())
    out = [f"Rows: {len(rows)}; the ranks' median pace over the one-GPU run's: "
           f"{', '.join(f'{q:.2f}' for q in rows['pace_median'].quantile([0, .1, .5, .9, 1]))} (min, p10, median, p90, "
           "max).", ""]
    for col, what in (("scaleout_err", "scale-out from one GPU"), ("anchored_err", "the same given the measured step"),
                      ("joint_err", "joint replay of the ranks")):
        if col not in rows:
            continue
        err = rows[col].to_numpy(dtype=float)
        near = np.abs(logp) < PACE_BAND
        out.append(f"- {what}: correlation of its signed error with log(pace) {np.corrcoef(logp, err)[0, 1]:+.2f}; "
                   f"mean |error| {100 * np.abs(err[near]).mean():.1f}% over the {near.sum()} rows whose ranks' host "
                   f"ran within {PACE_BAND:.0%} of the one-GPU run's, {100 * np.abs(err[~near]).mean():.1f}% over "
                   f"the other {(~near).sum()}")
    return out


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=RESULTS / "host_pace.md")
    a = p.parse_args(argv)
    frames = []
    for run in a.runs:
        table = scored(run)
        if table is None:
            print(f"{run}: no scale-out table in {RESULTS} for {run.name}; run benchmarks/scaleout_eval.py first",
                  file=sys.stderr)
            return 2
        frames.append(session_paces(run).merge(table, on=["host", "workload", "strategy", "world"]))
    rows = pd.concat(frames, ignore_index=True)
    cols = ["host", "workload", "strategy", "world", "pace_ranks", "pace_median", "scaleout_err", "joint_err"]
    table = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in rows.iterrows():
        table.append(f"| {r.host} | {r.workload} | {r.strategy} | {r.world} | {r.pace_ranks} | {r.pace_median:.2f} | "
                     f"{100 * r.scaleout_err:+.1f}% | {100 * r.joint_err:+.1f}% |")
    lines = ["# The ranks' host pace against the one-GPU run's (benchmarks/host_pace_eval.py)", "",
             f"Sessions: {', '.join(r.name for r in a.runs)}.", "", *summary(rows), "", *table, ""]
    a.out.write_text("\n".join(lines))
    print("\n".join(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue 27's validation: from a folder collect_distributed.py wrote (ground_truth.jsonl and one tar of traces per
workload), for every workload and strategy (ddp, fsdp) with N ranks measured:

(a) scale-out: the N-rank step predicted from the ONE-GPU trace (timeline/scaleout.py on the origin GPU) against
    the measured N-rank step (the slowest rank's median, no profiler);
(b) joint replay: the N rank traces replayed together (timeline/joint.py, each rank's profiler overhead removed)
    against the same measurement;
(c) anchored scale-out: (a) given the one-GPU step's own measurement (``--measured-step``, as a user with a training
    log has it): the scale-out's own error, without the one-GPU row's (launch-bound origin rows: issue 35).

    python benchmarks/scaleout_eval.py runs/h200x2 [--out benchmarks/results/scaleout/h200x2.md]

Writes a markdown table (and a .csv beside it) with, per row: the measured one-GPU and N-rank steps, both
predictions and their errors, and the baseline of predicting no change from one GPU; a summary line per method
(mean absolute and worst error) against the issue's bars (ERROR_BAR_SCALEOUT, ERROR_BAR_JOINT). Two columns say
what the N-rank traces show about the ranks' GPUs, which the one-GPU scale-out assumes equal to the one GPU:
- ``compute_x_r<k>``: rank k's compute kernels (all but NCCL) relative to the one-GPU trace's: per kernel name the
  ratio of median durations, weighted by the name's one-GPU kernel time (1.00: as fast as the one GPU; the slowest
  rank is the straggler every collective waits for);
- ``busy_floor_ms``: the largest over the ranks of the recorded compute-kernel busy time per step (mean over the
  ProfilerSteps): no replay that keeps the recorded kernel durations ends a step sooner, so where it exceeds the
  measured step the kernels ran slower while profiled than in the timed run, and the joint replay cannot reach it.
A workload whose evaluation raises is a row with its error in ``status``, not the end of the run.
"""
from __future__ import annotations

import argparse
import io
import json
import lzma
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from habitat_trace.ingest import classify as K  # noqa: E402
from habitat_trace.ingest import schema as S  # noqa: E402
from habitat_trace.ingest.trace import load  # noqa: E402
from habitat_trace.timeline.steps import step_figures  # noqa: E402
from habitat_trace.pipeline import Options, Run, iteration_figures  # noqa: E402

# The acceptance bars: scale-out from one GPU within 10% of the measured N-rank step, the joint replay of the
# measured ranks within 5% (issue 27, "Done when").
ERROR_BAR_SCALEOUT = 0.10
ERROR_BAR_JOINT = 0.05
# The collector's modes and the strategy each is predicted as: FSDP2 (fully_shard) and FSDP1 (FullyShardedDataParallel)
STRATEGY_OF = {"ddp": "ddp", "fsdp": "fsdp", "fsdp1": "fsdp1"}
# A rank whose compute kernels run this much slower than the one GPU's moves the step past ERROR_BAR_SCALEOUT on its
# own (a compute-bound step waits for it at every collective): the summary names it.
STRAGGLER_FACTOR = 1.0 + ERROR_BAR_SCALEOUT


def rows_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "ground_truth.jsonl").read_text().splitlines() if line.strip()]


def extract(folder: Path, into: Path) -> None:
    """The folder's traces under ``into``: collect_distributed.py's xz tar in parts (traces.tar.xz.NN), or the
    per-workload tars of its earlier layout."""
    parts = sorted(folder.glob("traces.tar.xz.*"))
    if parts:
        data = lzma.decompress(b"".join(p.read_bytes() for p in parts))
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            t.extractall(into, filter="data")
    for tar in sorted(folder.glob("*.tar")):
        with tarfile.open(tar) as t:
            t.extractall(into, filter="data")


def rank_files(base: Path, mode: str, world: int) -> list[Path]:
    """The rank traces of ``mode`` at ``world`` ranks under a workload's folder (``<mode>-w<N>/``, or ``<mode>/``
    in the earlier layout)."""
    folder = base / (mode if mode == "single" else f"{mode}-w{world}")
    if not folder.is_dir():
        folder = base / mode
    return sorted(folder.glob("rank*.pt.trace.json*"))


def anchored_scaleout(single: Any, world: int, strategy: str, measured_1gpu_ms: float) -> float:
    """The N-rank iteration (ms) predicted from the one-GPU trace given its measured un-profiled step
    (``compare TRACE --world-size N --strategy S --measured-step MS``: the host clock calibrated to it, issue 35), so
    the scale-out's own error shows without the origin row's."""
    options = Options.of(world_size=world, strategy=strategy, measured_step=measured_1gpu_ms)
    return float(Run([single], options).baseline().ranks[0].headline.iteration_ms)


def predicted_scaleout(single: Any, world: int, strategy: str) -> tuple[float, float, list[str], float, float]:
    """(one-GPU replayed iteration, N-rank predicted iteration, warnings, its range's low and high end) in ms, on
    the origin GPU, from the loaded one-GPU trace: what ``compare TRACE --world-size N --strategy S`` reports on its
    origin row."""
    alone = Run([single], Options.of()).baseline().ranks[0]
    many = Run([single], Options.of(world_size=world, strategy=strategy)).baseline()
    head = many.ranks[0].headline
    return (iteration_figures(alone.tables, alone.timeline)[0], head.iteration_ms, list(many.warnings),
            head.iteration_low_ms, head.iteration_high_ms)


def load_ranks(rank_files: list[Path]) -> list[Any]:
    return sorted((load(p) for p in rank_files), key=lambda t: t.distributed.rank if t.distributed else 0)


def joint(traces: list[Any]) -> tuple[float, float, float]:
    """The slowest rank's iteration (ms) of the ranks replayed together on their own GPU (``compare DIR``'s origin
    row), and its range."""
    head = Run(traces, Options.of()).baseline().slowest().headline
    return head.iteration_ms, head.iteration_low_ms, head.iteration_high_ms


def compute_kernels(trace: Any) -> pd.DataFrame:
    g = trace.gpu
    return g[(g[S.CAT] == S.CAT_KERNEL) & (g[S.KCLASS] != K.NCCL)]


def compute_factor(one: Any, rank: Any) -> float:
    """The rank's compute kernels relative to the one-GPU trace's (module doc: ``compute_x_r<k>``)."""
    k1, k = compute_kernels(one), compute_kernels(rank)
    med1, med = k1.groupby(S.NAME)[S.DUR].median(), k.groupby(S.NAME)[S.DUR].median()
    names = med1.index.intersection(med.index)
    if not len(names):
        return float("nan")
    weight = k1.groupby(S.NAME)[S.DUR].sum()[names]
    return float((med[names] / med1[names] * weight).sum() / weight.sum())


def busy_floor_ms(traces: list[Any]) -> float:
    """The largest over the ranks of the recorded compute-kernel busy time per ProfilerStep (module doc)."""
    return max(float(step_figures(t.steps, compute_kernels(t)).table["gpu_busy_ns"].mean()) / 1e6 for t in traces)


def evaluate_one(base: Path, mode: str, world: int, scaleout_only: bool = False,
                 single_base: Optional[Path] = None, measured_1gpu_ms: Optional[float] = None) -> dict[str, Any]:
    """Both predictions and the ranks' compute factors for one workload and strategy (extracted under ``base``, the
    one-GPU trace under ``single_base``, default ``base``); ``scaleout_only``: the scale-out from it alone."""
    one = load(rank_files(single_base or base, "single", 1)[0])
    one_pred, pred, warn, low, high = predicted_scaleout(one, world, STRATEGY_OF[mode])
    span = {"scaleout_low_ms": low, "scaleout_high_ms": high}
    if measured_1gpu_ms is not None:
        span["anchored_ms"] = anchored_scaleout(one, world, STRATEGY_OF[mode], measured_1gpu_ms)
    if scaleout_only:
        return {"replayed_1gpu_ms": one_pred, "scaleout_ms": pred, **span, "warnings": "; ".join(warn)}
    traces = load_ranks(rank_files(base, mode, world))
    factors = {f"compute_x_r{i}": compute_factor(one, t) for i, t in enumerate(traces)}
    j, j_low, j_high = joint(traces)
    return {"replayed_1gpu_ms": one_pred, "scaleout_ms": pred, **span, "joint_ms": j, "joint_low_ms": j_low,
            "joint_high_ms": j_high,
            "busy_floor_ms": busy_floor_ms(traces), **factors, "warnings": "; ".join(warn)}


def evaluate(folder: Path, only: Optional[str] = None, scaleout_only: bool = False,
             singles_from: Optional[Path] = None, modes: Optional[set[str]] = None) -> pd.DataFrame:
    """Every N-rank row of ``folder``; the one-GPU rows and traces from ``singles_from`` where ``folder`` has none
    (collect_distributed.py --modes fsdp1 alone, run after the full collection on the same host)."""
    rows = rows_of(folder)
    singles = {r["workload"]: r for r in rows_of(singles_from) if r["mode"] == "single"} if singles_from else {}
    singles.update({r["workload"]: r for r in rows if r["mode"] == "single"})
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        if (folder / "traces").is_dir():  # extracted already (the parts unpacked into traces/)
            tmp = str(folder / "traces")
        else:
            extract(folder, Path(tmp))
        for r in rows:
            name, mode = r["workload"], r["mode"]
            single = singles.get(name)
            if mode not in STRATEGY_OF or r["status"] != "ok" or single is None or single["status"] != "ok":
                continue
            if (only and only not in name) or (modes and mode not in modes):
                continue
            meas, meas1 = float(r["slowest_rank_ms"]), float(single["slowest_rank_ms"])
            row = {"host": folder.name, "workload": name, "strategy": mode, "world": r["world"],
                   "device": r["device"], "measured_1gpu_ms": meas1, "measured_ms": meas,
                   "no_change_err": meas1 / meas - 1, "status": "ok"}
            try:
                single_base = Path(tmp) / name
                if singles_from is not None and not (single_base / "single").is_dir():
                    single_base = singles_from / "traces" / name
                row.update(evaluate_one(Path(tmp) / name, mode, int(r["world"]), scaleout_only, single_base, meas1))
            except Exception as e:  # one workload's failure is its row, not the end of the evaluation
                row["status"] = f"error: {type(e).__name__}: {e}"[:300]
                print(f"{name} {mode}: {row['status']}", file=sys.stderr)
            print(f"{name} {mode} x{r['world']}: measured {meas:.2f} ms, scale-out {row.get('scaleout_ms', 0):.2f}, "
                  f"joint {row.get('joint_ms', 0):.2f}", file=sys.stderr, flush=True)
            out.append(row)
    df = pd.DataFrame(out)
    for col in ("scaleout_ms", "joint_ms", "anchored_ms"):
        if col not in df:
            df[col] = np.nan
    if len(df):
        df["scaleout_err"] = df["scaleout_ms"] / df["measured_ms"] - 1
        if "scaleout_low_ms" in df:
            df["in_range"] = (df["scaleout_low_ms"] <= df["measured_ms"]) & (df["measured_ms"] <= df["scaleout_high_ms"])
        if "joint_low_ms" in df:
            df["joint_in_range"] = (df["joint_low_ms"] <= df["measured_ms"]) & (df["measured_ms"] <= df["joint_high_ms"])
        df["joint_err"] = df["joint_ms"] / df["measured_ms"] - 1
        df["anchored_err"] = df["anchored_ms"] / df["measured_ms"] - 1
    return df


def summary(df: pd.DataFrame) -> list[str]:
    lines = []
    for col, bar, what in (("scaleout_err", ERROR_BAR_SCALEOUT, "scale-out from one GPU"),
                           ("anchored_err", ERROR_BAR_SCALEOUT,
                            "scale-out given the one-GPU step's measurement (--measured-step)"),
                           ("joint_err", ERROR_BAR_JOINT, "joint replay of the ranks"),
                           ("no_change_err", None, "baseline: the one-GPU step")):
        err = df[col].abs().dropna()
        if not len(err):
            lines.append(f"- {what}: no row evaluated")
            continue
        within = "" if bar is None else f", within {bar:.0%}: {int((err <= bar).sum())}/{len(err)}"
        inside = {"scaleout_err": "in_range", "joint_err": "joint_in_range"}.get(col)
        covered = f", inside its range: {int(df[inside].sum())}/{len(df)}" if inside in df else ""
        lines.append(f"- {what}: mean |error| {err.mean():.1%}, worst {err.max():.1%}{within}{covered}")
    lines += band_lines(df)
    factors = sorted(c for c in df.columns if c.startswith("compute_x_r"))
    for r in df.itertuples():
        slow = {c[len("compute_x_"):]: getattr(r, c) for c in factors if getattr(r, c) > STRAGGLER_FACTOR}
        if slow:
            ranks = ", ".join(f"{k} {v:.2f}x" for k, v in slow.items())
            lines.append(f"- slow compute, {r.workload} {r.strategy} x{r.world}: compute kernels of {ranks} the one-GPU "
                         "trace's (contention by NCCL's channels where a collective overlapped them: "
                         "docs/distributed.md)")
    floor = df[df["busy_floor_ms"] > df["measured_ms"]] if "busy_floor_ms" in df else df.iloc[:0]
    lines += [f"- {r.workload} {r.strategy}: the recorded compute busy time {r.busy_floor_ms:.1f} ms/step exceeds "
              f"the timed step {r.measured_ms:.1f} ms: the kernels ran slower while profiled" for r in floor.itertuples()]
    failed = df[df["status"] != "ok"]
    lines += [f"- {r.workload} {r.strategy}: {r.status}" for r in failed.itertuples()]
    return lines


def conformal(ratios: np.ndarray, q: float = 0.05) -> tuple[float, float]:
    """The split-conformal interval's ends (Lei et al., JASA 2018): the floor((n+1)q)-th and ceil((n+1)(1-q))-th
    order statistics of the rows' measured / predicted ratios."""
    r = np.sort(np.asarray(ratios, dtype=float))
    n = len(r)
    return float(r[max(int(np.floor((n + 1) * q)) - 1, 0)]), float(r[min(int(np.ceil((n + 1) * (1 - q))) - 1, n - 1)])


def band_lines(df: pd.DataFrame) -> list[str]:
    """The scale-out's and the joint replay's own bands (hostband.SCALEOUT_* and JOINT_* re-derived) and their
    coverage with each workload left out of them, over the rows of ``df`` (several runs' tables pooled for the
    committed figures)."""
    out = []
    for what, col in (("scale-out", "scaleout"), ("joint replay", "joint")):
        if f"{col}_ms" not in df or f"{col}_low_ms" not in df:
            continue
        ok = df[(df["status"] == "ok") & df[f"{col}_ms"].notna()]
        if len(ok) < 10:
            continue
        lo, hi = conformal((ok["measured_ms"] / ok[f"{col}_ms"]).to_numpy())
        inside = []
        for w in ok["workload"].unique():
            train, test = ok[ok["workload"] != w], ok[ok["workload"] == w]
            a, b = conformal((train["measured_ms"] / train[f"{col}_ms"]).to_numpy())
            # the rows' ranges already hold the pooled band: the host band's ends are not in the table apart, so the
            # held-out check takes the band refitted without the workload around the central value alone
            low, high = test[f"{col}_ms"] * a, test[f"{col}_ms"] * b
            inside += list((test["measured_ms"] >= low) & (test["measured_ms"] <= high))
        out.append(f"- band, {what}: measured / predicted over {len(ok)} rows, split-conformal 5%/95%: {lo:.3f}, "
                   f"{hi:.3f}; refitted without each workload, its band alone holds {sum(inside)}/{len(inside)}")
    return out


def reproducibility_lines(df: pd.DataFrame) -> list[str]:
    """How far the measured N-rank step is from what its own host's one-GPU measurement and the other sessions say,
    over several sessions' tables pooled: per row, the measured one-GPU step on that host plus the mean of what the
    same (workload, strategy, ranks) added over its one-GPU step on every other session (an "oracle" that knows the
    row's real one-GPU step and the added time's average exactly, and nothing of this host's run). A model that reads
    one trace can hardly beat it; its mean |error| is the floor that the runs' irreproducibility sets. Also the
    coefficient of variation of the measured N-rank and one-GPU steps over the sessions."""
    ok = df[df["status"] == "ok"].copy()
    ok["added"] = ok["measured_ms"] - ok["measured_1gpu_ms"]
    err, cv_n, cv_1 = [], [], []
    for _, g in ok.groupby(["workload", "strategy", "world"]):
        if len(g) < 2:
            continue
        total = g["added"].sum()
        oracle = g["measured_1gpu_ms"] + (total - g["added"]) / (len(g) - 1)
        err += list((oracle / g["measured_ms"] - 1).abs())
        if len(g) > 2:
            cv_n.append(g["measured_ms"].std() / g["measured_ms"].mean())
            cv_1.append(g["measured_1gpu_ms"].std() / g["measured_1gpu_ms"].mean())
    if not err:
        return []
    return [f"- reproducibility floor: the row's measured one-GPU step + the other sessions' mean added time: mean "
            f"|error| {np.mean(err):.1%} over {len(err)} rows; across sessions the measured N-rank step varies by "
            f"{np.mean(cv_n):.1%} and the one-GPU step by {np.mean(cv_1):.1%} (mean coefficient of variation)"]


def cell(col: str, v: Any) -> str:
    if isinstance(v, float) and np.isnan(v):
        return "-"
    if col.endswith("_err"):
        return f"{v:+.1%}"
    if col.startswith("compute_x"):
        return f"{v:.2f}"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def markdown(df: pd.DataFrame, folder: Path) -> str:
    factors = sorted(c for c in df.columns if c.startswith("compute_x_r"))
    cols = ["workload", "strategy", "world", "measured_1gpu_ms", "replayed_1gpu_ms", "measured_ms", "scaleout_ms",
            "scaleout_err", "anchored_ms", "anchored_err", "joint_ms", "joint_err", "no_change_err", *factors,
            "busy_floor_ms"]
    cols = [c for c in cols if c in df.columns]
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    body = "".join("| " + " | ".join(cell(c, v) for c, v in zip(cols, r)) + " |\n"
                   for r in df[cols].itertuples(index=False))
    device = df["device"].iat[0] if len(df) else "?"
    return (f"# Scale-out validation: {folder.name} ({device})\n\n{head}{body}\n" + "\n".join(summary(df)) + "\n")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path, nargs="?")
    p.add_argument("--out", type=Path, help="markdown file (default: benchmarks/results/scaleout/<folder>.md)")
    p.add_argument("--only", help="workloads whose name contains this")
    p.add_argument("--modes", help="only these strategies, comma-separated (e.g. fsdp,fsdp1: what FSDP's units move)")
    p.add_argument("--scaleout-only", action="store_true", help="the scale-out from one GPU alone (no joint replay)")
    p.add_argument("--singles-from", type=Path, help="the collection whose one-GPU rows and traces to use")
    p.add_argument("--band", nargs="+", type=Path, metavar="CSV", help="only print the band lines and the "
                   "reproducibility floor of these tables (benchmarks/results/scaleout/*.csv written by this script), "
                   "pooled")
    args = p.parse_args(argv)
    if args.band:
        pooled = pd.concat([pd.read_csv(f) for f in args.band], ignore_index=True)
        print("\n".join(band_lines(pooled) + reproducibility_lines(pooled)))
        return 0
    modes = set(args.modes.split(",")) if args.modes else None
    df = evaluate(args.folder, args.only, args.scaleout_only, args.singles_from, modes)
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

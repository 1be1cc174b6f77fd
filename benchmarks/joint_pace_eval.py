"""Experiment (not in the model): the joint replay with each rank's profiled host pace brought to its peers'.

The ranks of a data-parallel run execute one program, and their un-profiled steps are alike, but a profiled rank's
host runs its ops 1.5x (a whole step: GPT-2 DDP x4) to 5x (one rank's backward: Llama FSDP x2) slower than the same
ops on its peers, and the joint replay hands that to every rank through the collectives. Here each (rank, step,
phase) window (before backward; the autograd thread's backward; after) gets a pace: the weighted geometric mean over
op names of its de-profiled median duration over the median of that over every rank-step (weights: the reference
duration x the count); where a window is slower than its peers (pace > 1) its CPU durations are divided by the pace,
a window faster than them is left alone (``--mode clip``; ``median`` also slows the fast ones down). No constant is
fitted: the peers' median is the reference, and only slowness beyond it is taken as the profiler's.

    python benchmarks/joint_pace_eval.py clip DIR... > pace.log   # DIR: one run's rank traces, as scaleout_eval reads

``floor`` brings each window to the fastest rank-step's pace instead of the median's (the lower envelope: host noise
only adds time); a ``single`` DIR (the one-GPU trace) is repaced over its own steps. 2026-11-27, the six host
sessions: floor took the one-GPU origin rows 15.9% -> 11.8% (54 traces) but the scale-out from them 17.1% -> 18.0%
(bias -6.5% -> -12.9%) and the joint replay 14.9% -> 13.4% with 33 rows within 5% (38 before): not adopted
(docs/distributed.md).

Each DIR's measured step is read from ``ground_truth.jsonl`` three levels up (collect_distributed.py's layout).
docs/distributed.md ("Joint replay") has the figures of 2026-11-26 and 2026-11-27.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import load
from habitat_trace.pipeline import Options, Run

MIN_OTHER_THREAD_OPS = 10  # a step with fewer ops off the main thread has no separate backward phase


def windows(tables: Any) -> list[tuple[int, int, int, int]]:
    """(step, phase, origin start, origin end) of every step's phases: before backward, backward, after."""
    ops, steps = tables.ops, tables.steps
    out = []
    for k in range(len(steps)):
        s0 = int(steps[S.TS].iloc[k])
        s1 = s0 + int(steps[S.DUR].iloc[k])
        o = ops[(ops[S.TS] >= s0) & (ops[S.TS] < s1)]
        main = o[o["depth"] == 0][S.TID].mode()
        other = o[~o[S.TID].isin(main)]
        if len(other) > MIN_OTHER_THREAD_OPS:
            b0, b1 = int(other[S.TS].min()), int((other[S.TS] + other[S.DUR]).max())
            out += [(k, 0, s0, b0), (k, 1, b0, b1), (k, 2, b1, s1)]
        else:
            out.append((k, 0, s0, s1))
    return out


def medians(tables: Any, clock: Any, wins: list[tuple[int, int, int, int]]) -> dict[tuple[int, int], pd.DataFrame]:
    """Per window: each op name's median de-profiled duration and count."""
    ts = tables.ops[S.TS].to_numpy()
    end = ts + tables.ops[S.DUR].to_numpy()
    d = clock.deprofiled(end) - clock.deprofiled(ts)
    names = tables.ops[S.NAME].to_numpy()
    out = {}
    for k, phase, a, b in wins:
        m = (ts >= a) & (end <= b)
        out[(k, phase)] = pd.DataFrame({"name": names[m], "d": d[m]}).groupby("name").d.agg(["median", "count"])
    return out


def paces(per: list[dict[tuple[int, int], pd.DataFrame]], clip: bool, floor: bool = False
          ) -> list[dict[tuple[int, int], float]]:
    """Each rank's pace per (step, phase) against the median over every rank-step of the same phase (``floor``: the
    fastest rank-step's, the lower envelope: host noise only ever adds time)."""
    out: list[dict[tuple[int, int], float]] = [{} for _ in per]
    for phase in (0, 1, 2):
        cols = {(i, k): m[(k, q)] for i, m in enumerate(per) for (k, q) in m if q == phase}
        med = pd.concat({c: v["median"] for c, v in cols.items()}, axis=1).dropna() if len(cols) > 1 else None
        if med is None or med.empty:
            continue
        count = pd.concat({c: v["count"] for c, v in cols.items()}, axis=1).reindex(med.index).min(axis=1)
        ref = med.min(axis=1) if floor else med.median(axis=1)
        keep = ref > 0
        weight = (ref * count)[keep]
        for (i, k) in cols:
            p = float(np.exp((np.log(med[(i, k)][keep].clip(lower=1) / ref[keep]) * weight).sum() / weight.sum()))
            out[i][(k, phase)] = max(p, 1.0) if clip else p
    return out


def repaced(clock: Any, wins: list[tuple[int, int, int, int]], pace: dict[tuple[int, int], float]) -> Any:
    """The clock with the de-profiled time inside each window divided by its pace (cpuclock.CpuClock's C(t) gains
    knots at the windows' ends; t - C(t) stays monotone)."""
    a0 = np.array([w[2] for w in wins], dtype=np.int64)
    a1 = np.array([w[3] for w in wins], dtype=np.int64)
    at = np.unique(np.concatenate((clock.at_ns, a0, a1)))
    removed = clock.removed_ns(at).astype(np.float64)
    d = at - removed
    extra = np.zeros(len(at))
    d0, d1 = clock.deprofiled(a0), clock.deprofiled(a1)
    for i, (k, phase, _, _) in enumerate(wins):
        f = 1 - 1 / pace.get((k, phase), 1.0)
        inside = (at >= a0[i]) & (at <= a1[i])
        extra[inside] += f * (d[inside] - d0[i])
        extra[at > a1[i]] += f * (d1[i] - d0[i])
    return replace(clock, at_ns=at, cum_ns=np.rint(removed + extra).astype(np.int64))


def joint_ms_of(files: list[Path], mode: str) -> float:
    """The slowest rank's step of the joint replay of these rank traces (or of one trace: its steps are the peers),
    each host repaced by ``mode`` (none, clip, median, floor)."""
    traces = sorted((load(p) for p in files), key=lambda t: t.distributed.rank if t.distributed else 0)
    run = Run(traces, Options.of())
    if mode != "none":
        wins = [windows(r.tables) for r in run.ranks]
        per = [medians(r.tables, r.clock.clock, w) for r, w in zip(run.ranks, wins)]
        for r, w, p in zip(run.ranks, wins, paces(per, clip=mode in ("clip", "floor"), floor=mode == "floor")):
            r.__dict__["clock"] = replace(r.clock, clock=repaced(r.clock.clock, w, p))  # Rank.clock is cached
    return run.baseline().slowest().headline.iteration_ms


def measured_ms(rank_dir: Path) -> float:
    workload, run = rank_dir.parent.name, rank_dir.name
    for line in (rank_dir.parents[2] / "ground_truth.jsonl").open():
        r = json.loads(line)
        if r["workload"] == workload and (r["mode"] == run == "single" or f"{r['mode']}-w{r['world']}" == run):
            return float(r["slowest_rank_ms"])
    raise SystemExit(f"{rank_dir}: no ground_truth.jsonl row for {workload} {run}")


def main(argv: list[str]) -> None:
    mode, dirs = argv[0], [Path(d) for d in argv[1:]]
    for d in dirs:
        meas, pred = measured_ms(d), joint_ms_of(sorted(d.glob("rank*.json")), mode)
        print(f"{d.parents[2].name} {d.parent.name} {d.name} measured {meas:.2f} joint {pred:.2f} "
              f"err {pred / meas - 1:+.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

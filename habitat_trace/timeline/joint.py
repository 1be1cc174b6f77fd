"""``joint_replay(traces, predictions) -> JointReplay``: replay the ranks of one distributed step together.

A collective ends on every rank when the last rank has joined plus its transfer. Collectives are matched
across ranks by (process group, ``Seq``) when every rank's trace records ``Seq``, else by their order within
the process group (launch order on each rank: NCCL requires every rank of a group to issue its collectives in
the same order). The transfer of a matched collective is the shortest of its kernel durations over the ranks
(the rank that joined last waited least; measured: its kernel time; predicted: that time x the collective
model's ratio). Each rank is laid out by ``schedule`` with its collectives lasting (latest start of the
collective over the ranks + transfer - its own start); the starts move with those durations, so the layout is
repeated until no collective's duration changes (each pass settles at least the earliest unsettled collective;
``MAX_PASSES`` bounds it, and a warning says when it stopped early).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.scale.collective import collective_fields
from habitat_trace.scale.prediction import Prediction
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.replay import Timeline, replay
from habitat_trace.timeline.schedule import schedule

MAX_PASSES = 50  # a step of 50 collectives whose last rank changes every time; more is a warning


@dataclass(frozen=True)
class JointReplay:
    predictions: tuple[Prediction, ...]  # per rank: the collectives' durations include the wait for the others
    timelines: tuple[Timeline, ...]
    collectives: pd.DataFrame  # one row per (rank, matched collective): rank, row, key, transfer_ns, wait_ns
    passes: int
    warnings: tuple[str, ...] = ()


def match(traces: Sequence[Any]) -> pd.DataFrame:
    """Per rank (position in ``traces``) and NCCL kernel: its row in trace.gpu and the cross-rank key."""
    parts = []
    for rank, t in enumerate(traces):
        f = collective_fields(t)
        f["rank"] = rank
        f["start"] = t.gpu[S.TS].to_numpy()[f["row"].to_numpy()]
        parts.append(f)
    f = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not len(f):
        return f.assign(key=pd.Series(dtype=object))
    use_seq = bool((f["seq"] >= 0).all())
    f = f.sort_values(["rank", "start"], kind="stable")
    order = f.groupby(["rank", "pg"], sort=False).cumcount()
    ident = f["seq"] if use_seq else order
    f["key"] = f["pg"].astype(str) + "#" + ident.astype(str)
    # a key seen on one rank only has no partner in these traces: it keeps its own duration
    ranks = f.groupby("key")["rank"].transform("nunique")
    return f[ranks > 1].reset_index(drop=True)


def joint_replay(traces: Sequence[Any], predictions: Sequence[Prediction],
                 clocks: Optional[Sequence[CpuClock]] = None) -> JointReplay:
    """Every rank replayed with its collectives' durations set so that matched collectives end together (module
    doc); ``clocks``: each rank's host clock (pipeline.host_clock: the profiler's overhead removed; None: the
    recorded CPU timelines)."""
    m = match(traces)
    warnings: list[str] = []
    cl: list[Optional[CpuClock]] = list(clocks) if clocks is not None else [None] * len(traces)
    if not len(m):
        timelines = tuple(replay(t, p, c) for t, p, c in zip(traces, predictions, cl))
        return JointReplay(tuple(predictions), timelines, m.assign(transfer_ns=0, wait_ns=0), 0,
                           ("no collective matched across the ranks: each rank replayed on its own",))
    rank, row = m["rank"].to_numpy(), m["row"].to_numpy()
    pred_dur = np.array([int(predictions[r].dur_ns[i]) for r, i in zip(rank, row)], dtype=np.int64)
    key_codes, keys = pd.factorize(m["key"])
    transfer = pd.Series(pred_dur).groupby(key_codes).transform("min").to_numpy()
    durs = [np.asarray(p.dur_ns, dtype=np.int64).copy() for p in predictions]
    for r, i, t in zip(rank, row, transfer):
        durs[r][i] = t
    passes, start = 0, np.zeros(len(m), dtype=np.int64)
    for passes in range(1, MAX_PASSES + 1):
        starts = [schedule(t, d, c)[0] for t, d, c in zip(traces, durs, cl)]
        start = np.array([starts[r][i] for r, i in zip(rank, row)], dtype=np.int64)
        last = pd.Series(start).groupby(key_codes).transform("max").to_numpy()
        new = last + transfer - start
        old = np.array([durs[r][i] for r, i in zip(rank, row)], dtype=np.int64)
        if (new == old).all():
            break
        for r, i, d in zip(rank, row, new):
            durs[r][i] = d
    else:
        warnings.append(f"joint replay stopped after {MAX_PASSES} passes before every collective settled")
    preds = tuple(replace(p, dur_ns=d) for p, d in zip(predictions, durs))
    timelines = tuple(replay(t, p, c) for t, p, c in zip(traces, preds, cl))
    final = np.array([durs[r][i] for r, i in zip(rank, row)], dtype=np.int64)
    table = pd.DataFrame({"rank": rank, "row": row, "key": m["key"].to_numpy(), "collective": m["collective"],
                          "transfer_ns": transfer, "wait_ns": final - transfer})
    return JointReplay(preds, timelines, table, passes, tuple(warnings))


def origin_split(traces: Sequence[Any]) -> pd.DataFrame:
    """The measured traces' own split of each matched collective: transfer (the shortest kernel over the
    ranks) and wait (the rest), per rank; the same columns as ``JointReplay.collectives``."""
    m = match(traces)
    if not len(m):
        return m.assign(transfer_ns=0, wait_ns=0)
    dur = np.array([int(traces[r].gpu[S.DUR].iat[i]) for r, i in zip(m["rank"], m["row"])], dtype=np.int64)
    transfer = pd.Series(dur).groupby(pd.factorize(m["key"])[0]).transform("min").to_numpy()
    return pd.DataFrame({"rank": m["rank"].to_numpy(), "row": m["row"].to_numpy(), "key": m["key"].to_numpy(),
                         "collective": m["collective"], "transfer_ns": transfer, "wait_ns": dur - transfer})

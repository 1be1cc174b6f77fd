"""Several ranks of one distributed run: load a directory of per-rank traces, predict every rank on a target,
replay them jointly (timeline/joint.py) and summarize: the slowest rank's step, and per rank the collectives'
transfer time against the time spent waiting for the other ranks.

``compare_ranks(dir, to)`` returns one row per GPU (origin first) like ``analysis.compare``; ``rank_table``
the per-rank figures of one target (what ``explain DIR`` prints).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from habitat_trace.errors import TraceFormatError

TRACE_GLOBS = ("*.json", "*.json.gz")
COLUMNS = ("gpu", "iteration_ms", "slowest_rank", "gpu_busy_ms", "transfer_ms", "wait_ms", "speedup",
           "method_share")


def trace_files(directory: Path) -> list[Path]:
    files = sorted({p for g in TRACE_GLOBS for p in Path(directory).glob(g) if p.is_file()})
    if not files:
        raise TraceFormatError(f"{directory}: no trace files (*.json, *.json.gz) in this directory; "
                               "put one torch.profiler trace per rank there")
    return files


def load_ranks(directory: Path) -> list[Any]:
    """The directory's traces ordered by their ``distributedInfo`` rank; one error names a file without a
    rank or two files of one rank."""
    from habitat_trace.ingest import load

    by_rank: dict[int, Any] = {}
    for path in trace_files(directory):
        t = load(path)
        info = t.distributed
        if info is None:
            raise TraceFormatError(f"{path}: no distributedInfo (rank, world_size) in this trace; record every "
                                   "rank with torch.profiler after torch.distributed.init_process_group")
        if info.rank in by_rank:
            raise TraceFormatError(f"{path}: rank {info.rank} also in {by_rank[info.rank].path.name}; keep one "
                                   "trace per rank in the directory")
        by_rank[info.rank] = t
    return [by_rank[r] for r in sorted(by_rank)]


def rank_table(traces: list[Any], joint: Any) -> pd.DataFrame:
    """Per rank: iteration and GPU busy per step on the joint timeline, and the per-step time of its matched
    collectives split into transfer and waiting for the other ranks."""
    from habitat_trace.pipeline import iteration_figures

    rows = []
    c = joint.collectives
    for pos, (t, tl) in enumerate(zip(traces, joint.timelines)):
        it, busy = iteration_figures(t, tl)
        mine = c[c["rank"] == pos]
        steps = max(len(t.steps), 1)
        info = t.distributed
        rows.append({"rank": info.rank if info else pos, "iteration_ms": it, "gpu_busy_ms": busy,
                     "transfer_ms": float(mine["transfer_ns"].sum()) / steps / 1e6,
                     "wait_ms": float(mine["wait_ns"].sum()) / steps / 1e6})
    return pd.DataFrame(rows)


def predict_ranks(traces: list[Any], origins: list[Any], target: Optional[Any],
                  clocks: Optional[list[Any]] = None) -> Any:
    """Every rank predicted on ``target`` (None: its own origin GPU), then replayed jointly, each rank's CPU on its
    host clock (``clocks`` from rank_clocks; None: the default host's, the profiler's overhead removed)."""
    from habitat_trace.scale.engine import predict
    from habitat_trace.timeline.joint import joint_replay

    preds = [predict(t, o, target if target is not None else o) for t, o in zip(traces, origins)]
    return joint_replay(traces, preds, clocks if clocks is not None else rank_clocks(traces))


def rank_clocks(traces: list[Any], host: Optional[Any] = None) -> list[Any]:
    """Each rank's host clock (pipeline.host_clock for ``host``, default pipeline.Host()), built once per trace and
    shared by every target."""
    from habitat_trace.pipeline import Host, host_clock

    return [host_clock(t, host if host is not None else Host()).clock for t in traces]


def compare_ranks(directory: Path, to: list[str], specs: Optional[Path] = None, origin: Optional[str] = None,
                  deployment: Optional[dict[str, Any]] = None, host: Optional[Any] = None) -> pd.DataFrame:
    """One row per GPU (origin first): the slowest rank's iteration after a joint replay, its GPU busy time,
    and its collectives' transfer and wait per step. ``deployment``: what-ifs for ``with_deployment``; ``host``:
    pipeline.Host (default: the origin hosts without the profiler's overhead)."""
    from habitat_trace.analysis.compare import method_share
    from habitat_trace.pipeline import resolve_origin
    from habitat_trace.scale.collective import with_deployment
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    targets = [catalog.resolve(n) for n in to]
    traces = load_ranks(directory)
    origins = [resolve_origin(t, catalog, origin) for t in traces]
    clocks = rank_clocks(traces, host)
    rows = []
    for target in [None, *targets]:
        spec = None if target is None else with_deployment(target, **(deployment or {}))
        joint = predict_ranks(traces, origins, spec, clocks=clocks)
        per_rank = rank_table(traces, joint)
        slow = int(per_rank["iteration_ms"].to_numpy().argmax())
        method = np.concatenate([p.method for p in joint.predictions])
        dur = np.concatenate([p.dur_ns for p in joint.predictions])
        name = origins[0].name + " (origin)" if target is None else target.name
        rows.append({"gpu": name, "iteration_ms": float(per_rank["iteration_ms"].iat[slow]),
                     "slowest_rank": int(per_rank["rank"].iat[slow]),
                     "gpu_busy_ms": float(per_rank["gpu_busy_ms"].iat[slow]),
                     "transfer_ms": float(per_rank["transfer_ms"].iat[slow]),
                     "wait_ms": float(per_rank["wait_ms"].iat[slow]), "speedup": float("nan"),
                     "method_share": method_share(method, dur)})
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table["speedup"] = table["iteration_ms"].iat[0] / table["iteration_ms"]
    return table

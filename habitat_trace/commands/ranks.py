"""``compare DIR`` / ``explain DIR``: a directory of per-rank traces, replayed jointly (analysis/multirank.py).

``compare`` prints one row per GPU: the slowest rank's iteration and its collectives' transfer and wait per step;
``explain`` one row per rank on the origin and the target. JSON goes to stdout and nothing else does.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

from habitat_trace.errors import HabitatTraceError

WIDTH = 160


def deployment(interconnect: Optional[str], gpus_per_node: Optional[int], nodes: Optional[int]) -> dict[str, Any]:
    """The what-if options as ``with_deployment`` keywords; one error line for a bad value."""
    from habitat_trace.scale.collective import INTERCONNECTS

    if interconnect is not None and interconnect not in INTERCONNECTS:
        raise HabitatTraceError(f"--interconnect {interconnect!r}: choose one of {', '.join(INTERCONNECTS)}")
    for flag, v in (("--gpus-per-node", gpus_per_node), ("--nodes", nodes)):
        if v is not None and v < 1:
            raise HabitatTraceError(f"{flag} {v}: give a positive number")
    return {"interconnect": interconnect, "gpus_per_node": gpus_per_node, "nodes": nodes}


def only_for_ranks(trace: Path, whatif: dict[str, Any]) -> None:
    """compare/explain of one trace take no what-ifs (their orchestration is shared; scale takes them)."""
    if not Path(trace).is_dir() and any(v is not None for v in whatif.values()):
        raise HabitatTraceError(f"{trace}: --interconnect/--gpus-per-node/--nodes apply to `scale` and to a "
                                "directory of per-rank traces; for one trace run `habitat-trace scale` with them")


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return {k: float(x) for k, x in v.items()} if isinstance(v, dict) else v


def compare(directory: Path, names: list[str], specs: Optional[Path], origin: Optional[str], fmt: str,
            whatif: dict[str, Any], host: Optional[Any] = None) -> None:
    from habitat_trace.analysis.multirank import compare_ranks

    table = compare_ranks(directory, names, specs=specs, origin=origin, deployment=whatif, host=host)
    rows = [{k: _plain(v) for k, v in r.items()} for r in table.to_dict(orient="records")]
    if fmt == "json":
        sys.stdout.write(json.dumps(rows, indent=2, allow_nan=False) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="predicted iteration of the slowest rank per GPU (joint replay of every rank)",
              title_justify="left")
    for c in ("GPU", "iteration ms", "slowest rank", "GPU busy ms", "collective transfer ms", "wait on ranks ms",
              "speed-up", "methods (share of GPU time)"):
        t.add_column(c, justify="left" if c in ("GPU", "methods (share of GPU time)") else "right")
    for r in rows:
        methods = ", ".join(f"{k} {v:.0%}" for k, v in sorted(r["method_share"].items(), key=lambda kv: -kv[1]))
        t.add_row(r["gpu"], f"{r['iteration_ms']:.2f}", str(r["slowest_rank"]), f"{r['gpu_busy_ms']:.2f}",
                  f"{r['transfer_ms']:.2f}", f"{r['wait_ms']:.2f}", f"{r['speedup']:.2f}x", methods)
    Console(width=None if sys.stdout.isatty() else WIDTH).print(t)


def explain(directory: Path, to: str, specs: Optional[Path], origin: Optional[str], fmt: str,
            whatif: dict[str, Any], host: Optional[Any] = None) -> None:
    from habitat_trace.analysis.multirank import load_ranks, predict_ranks, rank_clocks, rank_table
    from habitat_trace.pipeline import resolve_origin
    from habitat_trace.scale.collective import with_deployment
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    target = with_deployment(catalog.resolve(to.strip()), **whatif)
    traces = load_ranks(directory)
    origins = [resolve_origin(t, catalog, origin) for t in traces]
    clocks = rank_clocks(traces, host)
    before = rank_table(traces, predict_ranks(traces, origins, None, clocks=clocks))
    joint = predict_ranks(traces, origins, target, clocks=clocks)
    after = rank_table(traces, joint)
    ranks: list[dict[str, Any]] = [{"rank": int(b["rank"]), **{f"{k}": [float(b[k]), float(a[k])] for k in
                                         ("iteration_ms", "gpu_busy_ms", "transfer_ms", "wait_ms")}}
             for b, a in zip(before.to_dict(orient="records"), after.to_dict(orient="records"))]
    result = {"origin": origins[0].name, "target": target.name, "ranks": ranks, "passes": joint.passes,
              "warnings": list(joint.warnings)}
    if fmt == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{result['origin']} -> {result['target']}, per rank and step: collectives' transfer time "
                    "and time waiting for the other ranks (origin -> target)", title_justify="left")
    for c in ("rank", "iteration ms", "GPU busy ms", "transfer ms", "wait ms"):
        t.add_column(c, justify="right")
    for r in ranks:
        t.add_row(str(r["rank"]), *(f"{r[k][0]:.2f} -> {r[k][1]:.2f}" for k in
                                    ("iteration_ms", "gpu_busy_ms", "transfer_ms", "wait_ms")))
    console = Console(width=None if sys.stdout.isatty() else WIDTH)
    console.print(t)
    for w in result["warnings"]:
        console.print(f"warning: {w}")

"""FSDP's units as scale/units.py infers them from a one-GPU trace, against the units the real FSDP2 run wrapped (issue
31): the rank traces name every unit in FSDP2's record_functions (``FSDP::all_gather (<module fqn>)``, the root's
without a name) and list its parameters in the ``fsdp::all_gather_copy_in`` inside it (its first input: one 1-d shard
per parameter; its second: the gathered buffer).

    python benchmarks/fsdp_units_eval.py RUN [RUN ...] [--out /tmp/units.md]

RUN: a folder collect_distributed.py wrote, its traces unpacked under RUN/traces/<workload>/{single,fsdp-w2}/. Per
workload (the first RUN holding it): the real units in order of their first all-gather (parameters, shard elements),
the inferred ones (each unit's shard elements computed as FSDP2 shards a parameter: dim 0 split into N chunks of
ceil(dim0 / N) rows, torch.chunk in torch/distributed/fsdp/_fully_shard/_fsdp_param.py), how many real units an
inferred one matches exactly (same parameters, same elements), and each side's root parameters.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Optional

import orjson
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from habitat_trace.ingest.trace import load  # noqa: E402
from habitat_trace.scale.dataparallel import step_units  # noqa: E402
from habitat_trace.scale.params import recover  # noqa: E402

ALL_GATHER, COPY_IN = "FSDP::all_gather", "fsdp::all_gather_copy_in"


def real_units(trace: Path) -> tuple[int, list[tuple[str, int, int]]]:
    """(world size, [(module fqn or "<root>", parameters, shard elements)]) in the order of their first all-gather:
    each ``FSDP::all_gather (<fqn>)`` on a CPU thread (the root's without a name) holds the unit's
    ``fsdp::all_gather_copy_in``, whose first input lists the parameters' shards and whose second is the gathered
    buffer (world x the shard)."""
    doc = orjson.loads(trace.read_bytes())
    world = int(doc.get("distributedInfo", {}).get("world_size", 1))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    gathers = sorted((e for e in ev if str(e.get("name", "")).split(" (")[0] == ALL_GATHER), key=lambda e: e["ts"])
    copies = sorted((e for e in ev if e.get("name") == COPY_IN), key=lambda e: e["ts"])
    out: dict[str, tuple[str, int, int]] = {}
    for g in gathers:
        name = g["name"][len(ALL_GATHER):].strip(" ()") or "<root>"
        inside = [c for c in copies if c["tid"] == g["tid"] and g["ts"] <= c["ts"] <= g["ts"] + g["dur"]]
        if inside and name not in out:
            dims = inside[0]["args"]["Input Dims"]
            out[name] = (name, len(dims[0]), int(dims[1][0]) // world)
    return world, list(out.values())


def shard_elements(shape: tuple[int, ...], world: int) -> int:
    """One rank's elements of a parameter FSDP2 shards on dim 0 (torch.chunk: ceil(dim0 / world) rows, padded)."""
    if not shape:
        return 1
    return math.ceil(shape[0] / world) * int(math.prod(shape[1:]))


def inferred_units(single: Path, world: int, wrap: str = "blocks") -> tuple[list[tuple[int, int]], int, int]:
    """([(parameters, shard elements)] per inferred unit in forward order, root parameters, all parameters)."""
    t = load(single)
    params = recover(t)
    f, units, _ = step_units(t, params, params.steps[-1], wrap)
    shapes = f["shape"].tolist()
    rows = [(b - a, sum(shard_elements(s, world) for s in shapes[a:b])) for a, b in sorted(units, reverse=True)]
    return rows, len(f) - sum(b - a for a, b in units), len(f)


def compare(run: Path, workload: str, wrap: str = "blocks") -> Optional[dict[str, Any]]:
    base = run / "traces" / workload
    ranks = sorted((base / "fsdp-w2").glob("rank0.pt.trace.json*"))
    singles = sorted((base / "single").glob("rank0.pt.trace.json*"))
    if not ranks or not singles:
        return None
    world, real = real_units(ranks[0])
    real_blocks = [(n, e) for name, n, e in real if name != "<root>"]
    got, root, total = inferred_units(singles[0], world, wrap)
    pool = list(real_blocks)
    matched = 0
    for u in got:
        if u in pool:
            pool.remove(u)
            matched += 1
    real_root = next((n for name, n, e in real if name == "<root>"), 0)
    return {"run": run.name, "workload": workload, "params": total, "real_units": len(real_blocks),
            "inferred_units": len(got), "matched": matched, "real_root_params": real_root, "inferred_root_params": root,
            "real_sizes": sizes(n for n, _ in real_blocks), "inferred_sizes": sizes(n for n, _ in got)}


def sizes(counts: Any) -> str:
    """Run-length sizes in forward order: 6x58 or 9, 13x3, ..."""
    out: list[list[int]] = []
    for c in counts:
        if out and out[-1][0] == c:
            out[-1][1] += 1
        else:
            out.append([c, 1])
    return ", ".join(f"{c}x{k}" if k > 1 else str(c) for c, k in out)


def _markdown(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(str(v) for v in r) + " |\n" for r in df.itertuples(index=False))


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--wrap", default="blocks", help="the fsdp_wrap to infer with (scale/dataparallel.py WRAPS)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    seen, rows = set(), []
    for run in args.runs:
        for wl in sorted(p.name for p in (run / "traces").iterdir() if p.is_dir()):
            if wl in seen:
                continue
            row = compare(run, wl, args.wrap)
            if row is not None:
                seen.add(wl)
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    text = _markdown(df) if len(df) else "no FSDP2 rank traces"
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

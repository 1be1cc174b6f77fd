"""Hundreds of ranks (issue 36): the memory of the joint replay's reduce step and the time per rank of
``compare DIR``'s map -> reduce -> map (pipeline/fanout.py) at 8, 64 and 256 ranks, and the parent process's peak of
``compare DIR --jobs 2`` on a set of large ranks.

``scaling``: an N-rank run replicated from a real 2-rank one (tests/dist_helpers.replicate_ranks: rank r is source
rank r % 2 with distributedInfo's rank and world size set; its collectives match on every rank), ``compare --to
A100`` through fan_out in this process (LocalPool(1): no other process's time counted). Per N: wall seconds / N
(both maps, the reduce); what the reduce holds (the pickled summaries of every rank, target and host clock, as the
driver receives them) and tracemalloc's peak inside the settles (the reduce's own working memory); the traces' JSON.
Sources: the FSDP pair (96 all-gathers + 48 reduce-scatters a rank in 508 GPU rows), the DDP pair (32 all-reduces in
604) and the A100 DDP ResNet step (9 collectives in 1,507 rows, as both ranks): the reduce follows the collectives.

``parent``: 8 ranks of the real HTA a100_nccl trace (../shared, rank 0 of a 2-rank DDP ResNet run, 9.8 MB of JSON,
21 NCCL kernels) made ``--copies`` times longer (benchmarks/ingest_speed.build: shifted copies, ids remapped) and
then replicated as 8 ranks: about the per-rank size of a DLRM-style training rank (its time in many small embedding
kernels, a few hundred collectives a rank). ``habitat-trace compare DIR --to A100 --jobs 2`` in a fresh process;
its own peak RSS (VmHWM: the two pool processes are not in it) against the ranks' summed JSON size.

    python benchmarks/ranks_scale.py scaling --ranks 8 64 256
    python benchmarks/ranks_scale.py parent --copies 10
"""
from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.dist_helpers import replicate_ranks  # noqa: E402

DATA = ROOT / "tests" / "data"
SOURCES = {
    "fsdp": [DATA / "fsdp_mlp_h100x2" / "rank0.pt.trace.json.gz", DATA / "fsdp_mlp_h100x2" / "rank1.pt.trace.json.gz"],
    "ddp": [DATA / "dist_mlp_h100x2" / "ddp-rank0.pt.trace.json.gz",
            DATA / "dist_mlp_h100x2" / "ddp-rank1.pt.trace.json.gz"],
    "a100_nccl": [DATA / "a100_nccl_step5.json.gz"],
}
HTA_NCCL = ROOT.parent / "shared" / "data" / "external-traces" / "a100_nccl.json.gz"


def scaling(source: str, world: int, work: Path) -> dict[str, Any]:
    import habitat_trace.pipeline.fanout as fanout
    from habitat_trace.pipeline.jobs import uncompressed_size
    from habitat_trace.pipeline import Options
    from habitat_trace.scale.specs import load_catalog

    files = replicate_ranks(SOURCES[source], world, work / f"{source}{world}")
    catalog = load_catalog(None)
    held: dict[str, int] = {"settle_peak": 0, "summaries": 0, "collectives": 0}
    settle, summarize = fanout.settle, fanout._summarize

    def measured_settle(summaries: Any) -> Any:
        tracemalloc.start()
        try:
            return settle(summaries)
        finally:
            held["settle_peak"] = max(held["settle_peak"], tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    def measured_summarize(*args: Any) -> Any:
        m = summarize(*args)
        held["summaries"] += len(pickle.dumps(m.summaries))
        held["collectives"] = held["collectives"] or len(m.summaries[0][0].rows)
        return m

    fanout.settle, fanout._summarize = measured_settle, measured_summarize
    try:
        t0 = time.perf_counter()
        fanout.fan_out(files, Options(catalog), [catalog.resolve("A100")], fanout.LocalPool(1))
        wall = time.perf_counter() - t0
    finally:
        fanout.settle, fanout._summarize = settle, summarize
    json_bytes = sum(uncompressed_size(f) for f in files)
    for f in files:
        f.unlink()
    return {"source": source, "ranks": world, "s_per_rank": wall / world, "json_mb": json_bytes / 1e6,
            "collectives_per_rank": held["collectives"], "summaries_mb": held["summaries"] / 1e6,
            "settle_peak_mb": held["settle_peak"] / 1e6}


def parent(copies: int, work: Path, jobs: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ingest_speed import build

    from habitat_trace.pipeline.jobs import uncompressed_size

    big = work / "a100_nccl_long.json"
    build(HTA_NCCL, copies, big)
    files = replicate_ranks([big], 8, work / "dlrm8")
    big.unlink()
    json_bytes = sum(uncompressed_size(f) for f in files)
    # VmHWM, not getrusage: ru_maxrss keeps the peak of the image before exec (this process, which built the set)
    code = ("import sys\nfrom habitat_trace.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "print('maxrss_kb', hwm, file=sys.stderr)\n")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, "compare", str(work / "dlrm8"), "--to", "A100", "--jobs",
                          str(jobs), "--format", "csv"], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    rss = int(out.stderr.rsplit("maxrss_kb", 1)[1].split()[0]) * 1024
    return {"ranks": 8, "json_mb_per_rank": json_bytes / 8 / 1e6, "json_mb_total": json_bytes / 1e6,
            "parent_peak_mb": rss / 1e6, "parent_over_json": rss / json_bytes, "wall_s": wall,
            "table": out.stdout}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["scaling", "parent"])
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 256])
    ap.add_argument("--sources", nargs="+", default=list(SOURCES))
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.what == "parent":
            print(parent(args.copies, Path(tmp), args.jobs), flush=True)
            return
        for source in args.sources:
            for n in args.ranks:
                print(scaling(source, n, Path(tmp)), flush=True)


if __name__ == "__main__":
    main()

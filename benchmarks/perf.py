"""Speed and memory of ``habitat-trace scale`` and of the paths issue 34 bounds, each against its baseline.

Builds the issue's trace (``--source`` replicated ``--copies`` times, times, ids, correlations, External ids, flow
ids and step numbers shifted: ingest_speed.build; the shared ResNet-50 FP32 step x 70 is 1.12M events, 272 MB;
written to /tmp, never the repo) and runs fresh processes from this one in interleaved rounds, so a busy spell on a
shared machine hits both sides of a ratio alike (best of ``--repeat``; each process's peak RSS from ``os.wait4``):

- scale: ``scale BIG --to A100 -o OUT.json`` against an orjson load + dump of BIG (the floor of any tool that
  rewrites the JSON; the GC on, as a plain script runs it); with ``--against DIR``, also the same ``scale`` run from
  the code in DIR (an export of an earlier commit: ``git archive C | tar -x -C DIR``) in the same rounds, its median
  and best beside ours and its output compared byte for byte;
- range: in one child process per round, the target's central replay (prediction, replay, launch-queue rounds:
  ``Run.replay``) against its range (the replays on the host band's fast and slow clocks: ``headline``), and the
  same for the origin's;
- world: ``compare T --to A100 --world-size 4`` against ``compare T --to A100`` (T: ``--trace``);
- dir: ``compare DIR --to A100`` of ``--ranks`` ranks against ``compare`` of one of them (the ranks: T scaled out to
  its own GPU with ``--world-size`` N and written once per rank, distributedInfo set);
- all: ``scale T --to all -o D/`` (52 targets) against ``scale T --to A100 -o D/``, with ``--jobs`` (left out by
  default: scale's own choice, commands/scale.auto_jobs); with
  ``--against DIR``, the same two from DIR's code in the same rounds, and the 52 outputs compared byte for byte.

    python benchmarks/perf.py [--suite scale,range,world,dir,all] [--repeat 3] [--copies 70] [--gz] [--jobs 2]
                              [--against DIR]
"""
from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Optional

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest_speed import build  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "traces" / "h100-sxm"
SOURCE = SHARED / "resnet50_b64_fp32.pt.trace.json.gz"  # issue 34's trace: this step x 70
SUITES = ("scale", "range", "world", "dir", "all")
# issue 34's bounds (the ratios' aims: docs/performance.md)
RATIO_BOUND, RATIO_AIM = 1.5, 1.0  # scale / orjson round trip
RSS_BOUND, RSS_AIM = 3.0, 2.0  # scale's peak RSS / file size
RANGE_BOUND = 0.2  # the range over the central replay
WORLD_BOUND = 2.0  # compare --world-size N / compare
ALL_BOUND = 3.0  # scale --to all / scale --to one
HELP_BOUND_S = 0.3  # issue 8: `habitat-trace --help` must feel instant
ROUND_TRIP = ("import orjson, sys; d = orjson.loads(open(sys.argv[1], 'rb').read()); "
              "open(sys.argv[2], 'wb').write(orjson.dumps(d))")
RANGE = """
import sys, time
from pathlib import Path
from habitat_trace.pipeline import Options, Run
options = Options.of()
run = Run.open([Path(sys.argv[1])], options)
target = options.targets(sys.argv[2])[0]
t = time.perf_counter(); base = run.baseline().ranks[0]; b = time.perf_counter() - t
t = time.perf_counter(); base.headline; br = time.perf_counter() - t
t = time.perf_counter(); rr = run.replay(target).ranks[0]; c = time.perf_counter() - t
t = time.perf_counter(); rr.headline; r = time.perf_counter() - t
print(b, br, c, r)
"""


def run(argv: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes) and stdout of one child process; fails loudly when it fails. Its output goes
    to files (a pipe could fill and block it), and ``os.wait4`` reaps it with its resource usage."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(map(str, argv))} failed ({proc.returncode}): {err.read().decode()[-2000:]}")
        return wall, usage.ru_maxrss * 1024, out.read().decode()  # Linux reports KiB


def ht(*args: object) -> list[str]:
    return [sys.executable, "-m", "habitat_trace", *map(str, args)]


def interleaved(cmds: dict[str, list[str]], repeat: int,
                walls: Optional[dict[str, list[float]]] = None) -> dict[str, tuple[float, int, str]]:
    """Best wall time, peak RSS and the last stdout per command; rounds interleave them (every wall time in
    ``walls`` when given)."""
    best: dict[str, tuple[float, int, str]] = {k: (float("inf"), 0, "") for k in cmds}
    for _ in range(repeat):
        for k, argv in cmds.items():
            wall, rss, out = run(argv)
            best[k] = (min(best[k][0], wall), max(best[k][1], rss), out)
            if walls is not None:
                walls.setdefault(k, []).append(wall)
    return best


def ht_from(code: Path, *args: object) -> list[str]:
    """``ht(*args)`` run from the package in ``code`` (put first on sys.path), not this checkout's."""
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(code)!r}); sys.argv = ['habitat-trace', "
            f"*{[str(a) for a in args]!r}]; from habitat_trace.cli import main; main()"]


def load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def suite_scale(big: Path, tmp: Path, repeat: int, gz: bool, against: Optional[Path] = None) -> None:
    size = big.stat().st_size
    cmds = {"round trip": [sys.executable, "-c", ROUND_TRIP, str(big), str(tmp / "rt.json")],
            "scale": ht("scale", big, "--to", "A100", "-o", tmp / "out.json")}
    if gz:
        cmds["scale .gz"] = ht("scale", big, "--to", "A100", "-o", tmp / "out.json.gz")
    if against is not None:
        cmds["against"] = ht_from(against, "scale", big, "--to", "A100", "-o", tmp / "against.json")
    walls: dict[str, list[float]] = {}
    best = interleaved(cmds, repeat, walls)
    (t_rt, rss_rt, _), (t_sc, rss_sc, _) = best["round trip"], best["scale"]
    print(f"scale: file {size / 1e6:.0f} MB; best of {repeat} interleaved rounds; load average {load_average()}")
    print(f"  orjson load+dump   {t_rt:6.2f} s   peak RSS {rss_rt / 1e6:5.0f} MB = {rss_rt / size:.2f}x file")
    print(f"  scale -> .json     {t_sc:6.2f} s   ratio {t_sc / t_rt:.2f} (bound {RATIO_BOUND}, aim {RATIO_AIM})   "
          f"peak RSS {rss_sc / 1e6:5.0f} MB = {rss_sc / size:.2f}x file (bound {RSS_BOUND}, aim {RSS_AIM})")
    if gz:
        t_gz, rss_gz, _ = best["scale .gz"]
        print(f"  scale -> .json.gz  {t_gz:6.2f} s   ratio {t_gz / t_rt:.2f}   peak RSS {rss_gz / size:.2f}x file")
    if against is not None:
        t_ag, rss_ag, _ = best["against"]
        same = (tmp / "out.json").read_bytes() == (tmp / "against.json").read_bytes()
        print(f"  scale from {against}: {t_ag:6.2f} s   ratio {t_ag / t_rt:.2f}   peak RSS {rss_ag / size:.2f}x file; "
              f"output {'byte-identical' if same else 'DIFFERENT'}")
        for k in ("round trip", "scale", "against"):
            print(f"  {k:10s} every round: {' '.join(f'{w:.2f}' for w in walls[k])} s, median "
                  f"{statistics.median(walls[k]):.2f} s")
    h = min(run(ht("--help"))[0] for _ in range(3))
    print(f"  habitat-trace --help {h:.3f} s (bound {HELP_BOUND_S})")


def suite_range(big: Path, repeat: int) -> None:
    rounds = [[float(v) for v in run([sys.executable, "-c", RANGE, str(big), "A100"])[2].split()]
              for _ in range(repeat)]
    b, br, c, r = (min(x[i] for x in rounds) for i in range(4))
    print(f"range: best of {repeat} processes; load average {load_average()}")
    print(f"  target A100: central replay {c:.2f} s, range {r:.2f} s = {r / c:.0%} of it (bound {RANGE_BOUND:.0%})")
    print(f"  origin: replay {b:.2f} s (with the trace's layout), range {br:.2f} s = {br / b:.0%} (the band's "
          "tables built once)")


def suite_world(trace: Path, repeat: int) -> None:
    best = interleaved({"compare": ht("compare", trace, "--to", "A100"),
                        "world": ht("compare", trace, "--to", "A100", "--world-size", "4")}, repeat)
    t0, t1 = best["compare"][0], best["world"][0]
    print(f"world: {trace.name}; best of {repeat}; load average {load_average()}")
    print(f"  compare {t0:.2f} s, compare --world-size 4 {t1:.2f} s: {t1 / t0:.2f}x (bound {WORLD_BOUND})")


def rank_dir(trace: Path, ranks: int, tmp: Path) -> Path:
    """``ranks`` traces of one data-parallel run: ``trace`` scaled out to its own GPU, written once per rank."""
    one = tmp / "scaled_out.json"
    run(ht("scale", trace, "--to", "H100", "--world-size", ranks, "-o", one))
    doc = orjson.loads(one.read_bytes())
    out = tmp / f"ranks{ranks}"
    out.mkdir(exist_ok=True)
    for r in range(ranks):
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": ranks}
        (out / f"rank{r}.pt.trace.json.gz").write_bytes(gzip.compress(orjson.dumps(doc), 6, mtime=0))
    return out


def suite_dir(trace: Path, ranks: int, tmp: Path, repeat: int) -> None:
    d = rank_dir(trace, ranks, tmp)
    best = interleaved({"one": ht("compare", d / "rank0.pt.trace.json.gz", "--to", "A100"),
                        "dir": ht("compare", d, "--to", "A100")}, repeat)
    t1, tn = best["one"][0], best["dir"][0]
    print(f"dir: {ranks} ranks of {trace.name} scaled out; best of {repeat}; load average {load_average()}")
    print(f"  compare one rank {t1:.2f} s, compare DIR {tn:.2f} s = {tn / t1:.2f}x one rank's (bound {ranks})")


def suite_all(trace: Path, jobs: int, tmp: Path, repeat: int, against: Optional[Path] = None) -> None:
    cmds = {}
    sides = [("", ht)] + ([(" against", partial(ht_from, against))] if against is not None else [])
    for side, make in sides:
        for key, to in (("one", "A100"), ("all", "all")):
            (tmp / f"{key}{side.strip()}").mkdir(exist_ok=True)
            jobs_args = ("--jobs", jobs) if jobs else ()  # 0: scale's own default (commands/scale.auto_jobs)
            cmds[key + side] = make("scale", trace, "--to", to, "-o", f"{tmp / (key + side.strip())}/", *jobs_args)
    walls: dict[str, list[float]] = {}
    best = interleaved(cmds, repeat, walls)
    print(f"all: {trace.name}, --jobs {jobs or 'left out'}, {os.cpu_count()} CPUs; best of {repeat}; "
          f"load average {load_average()}")
    for side in ("", " against") if against is not None else ("",):
        t1, ta = best["one" + side][0], best["all" + side][0]
        print(f"  {'from ' + str(against) if side else 'this checkout'}: scale --to A100 {t1:.2f} s, --to all "
              f"({len(list((tmp / ('all' + side.strip())).glob('*.gz')))} targets) {ta:.2f} s = {ta / t1:.2f}x "
              f"(bound {ALL_BOUND}); every round: {' '.join(f'{w:.2f}' for w in walls['one' + side])} s / "
              f"{' '.join(f'{w:.2f}' for w in walls['all' + side])} s")
    if against is not None:
        ours, theirs = sorted((tmp / "all").glob("*.gz")), sorted((tmp / "allagainst").glob("*.gz"))
        same = [a.name for a in ours] == [b.name for b in theirs] and all(
            a.read_bytes() == b.read_bytes() for a, b in zip(ours, theirs))
        print(f"  the {len(ours)} outputs {'byte-identical' if same else 'DIFFERENT'} to the other checkout's")


def main(argv: Optional[list[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default=",".join(SUITES), help=f"comma-separated: {', '.join(SUITES)}")
    p.add_argument("--source", type=Path, default=SOURCE, help="the trace replicated into the big one")
    p.add_argument("--copies", type=int, default=70)
    p.add_argument("--trace", type=Path, default=SOURCE, help="the trace of the world, dir and all suites")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--jobs", type=int, default=0, help="scale --jobs for the all suite (0: scale's default)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--gz", action="store_true", help="also time a gzip output (.json.gz)")
    p.add_argument("--against", type=Path, help="scale and all suites: also time the code in this folder (an earlier "
                   "commit's export) in the same rounds")
    a = p.parse_args(argv)
    suites = [s.strip() for s in a.suite.split(",") if s.strip()]
    if unknown := set(suites) - set(SUITES):
        raise SystemExit(f"--suite: unknown {sorted(unknown)}; choose from {', '.join(SUITES)}")
    big = Path(f"/tmp/habitat_perf_{a.source.name.split('.')[0]}_x{a.copies}.pt.trace.json")
    if {"scale", "range"} & set(suites) and not big.exists():
        print(f"built {big}: {build(a.source, a.copies, big):,} events", flush=True)
    with tempfile.TemporaryDirectory(prefix="habitat_perf_") as tmp:
        for s in suites:
            if s == "scale":
                suite_scale(big, Path(tmp), a.repeat, a.gz, a.against)
            elif s == "range":
                suite_range(big, a.repeat)
            elif s == "world":
                suite_world(a.trace, a.repeat)
            elif s == "dir":
                suite_dir(a.trace, a.ranks, Path(tmp), a.repeat)
            else:
                suite_all(a.trace, a.jobs, Path(tmp), a.repeat, a.against)
            sys.stdout.flush()


if __name__ == "__main__":
    main()

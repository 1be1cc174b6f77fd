"""Which GPU to rent: ``gpu_table(run, targets) -> DataFrame``, one row per GPU (the origin first); the Python API's
``Trace.compare`` and the ``compare`` command return it.

Pure: predicts and replays the run on each target (pipeline.Run.replay); prints and writes nothing. A run of
several ranks reports its slowest rank, whose step sets the run's. The command (commands/compare.py) renders it.

Definitions (README, "Which GPU should I rent?"):
- ``iteration_ms``: max(mean replayed ProfilerStep span, mean replayed GPU busy time of a step), replayed on the
  target host's clock: the profiler's own overhead removed (pipeline.host), so it is the real loop's iteration,
  not the profiled one. The replayed CPU span keeps a launch-bound step launch-bound (its blocking calls end when
  the GPU work ends on the target); the GPU busy time covers a step without a blocking call, whose queue grows
  until the GPU's pace sets the period. Without ProfilerSteps the whole trace is one step (replayed GPU span). On
  the origin row, a step the user measured (Host.measured_step_ms, --measured-step) is the iteration exactly
  (``iteration_source`` "given"); a trace that carries its measured un-profiled step time (habitat_trace.schedule)
  reports max(that, the GPU busy time) (``iteration_source`` "measured"); else the estimate ("estimated"); every
  target row is "predicted".
- ``iteration_low_ms``..``iteration_high_ms``: what the trace cannot tell, the host's pace without the profiler
  (timeline/hostband.py): the same replay on the fastest and slowest host clocks the trace is consistent with,
  never below what the trace proves on the origin (timeline/floors.py); ``range_source`` says what the band rests
  on ("model": nothing anchors it, the origin rows' measured error; "measured"/"given": the loop's noise around the
  step the trace carries or the user gave, the given origin row a point; "none": the profiler's overhead kept, a
  point). A GPU-bound row's range is (nearly) a point; ``anchor_note`` says when an estimated origin's is wide.
- ``whatif``: the deployment what-ifs a target row is predicted with (--interconnect, --gpus-per-node, --nodes; None
  on the origin row and without them), so that the origin's GPU under a what-if reads as such, not as a twin row.
- ``bound``: "launch" when the GPU is busy less than ``LAUNCH_BOUND_BUSY`` of the iteration, else "gpu".
- ``usd_per_1k_iterations`` = usd_per_hour x GPUs (one per rank) x iteration_ms x 1000 / 3.6e6.
- memory: see habitat_trace/analysis/memory.py (recorded peak or estimate, margin rule); the largest rank's.
- ``slowest_rank``, ``transfer_ms``, ``wait_ms`` (several ranks only): the slowest rank, and its matched
  collectives' transfer time and time waiting for the other ranks per step (timeline/joint.py).
- ``--world-size N`` > 1 (a one-GPU trace as one of N data-parallel ranks, every row including the origin's) adds
  SCALEOUT_COLUMNS: ``world_size``, ``strategy``, ``collectives`` per step, ``comm_ms`` (the GPU time a collective
  runs, per step) and ``exposed_comm_ms`` (the part no compute kernel overlaps), means over the ProfilerSteps
  (ScaledOut.communication); ``usd_per_1k_iterations`` is then for all N GPUs.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd

from habitat_trace.errors import UsageError
from habitat_trace.pipeline import DataParallel, Run
from habitat_trace.pipeline.host import overhead_ms
from habitat_trace.pipeline.run import RankReplay, Replay
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.prediction import METHODS
from habitat_trace.timeline import hostband

COLUMNS = ("gpu", "origin", "whatif", "iteration_ms", "iteration_low_ms", "iteration_high_ms", "range_source",
           "gpu_busy_ms", "speedup", "bound", "usd_per_hour", "price_source", "usd_per_1k_iterations",
           "peak_memory_gib", "memory_source", "fits_memory", "method_share", "iteration_source",
           "profiler_overhead_ms", "ranks", "slowest_rank", "transfer_ms", "wait_ms", "warnings")
SCALEOUT_COLUMNS = ("world_size", "strategy", "collectives", "comm_ms", "exposed_comm_ms")  # only with --world-size
# A GPU busy less than half of the step waits on the CPU (launches, Python, data) more than it computes:
# buying a faster GPU then shortens the step by less than the speed-up of its kernels.
LAUNCH_BOUND_BUSY = 0.5
# An origin range wider than a measured loop's own noise (hostband.MEASURED_SLOW / MEASURED_FAST: 1.41x) is wide;
# with nothing anchoring the origin row, compare says so under its table (anchor_note, issue 35).
WIDE_RANGE = hostband.MEASURED_SLOW / hostband.MEASURED_FAST
MS_PER_HOUR = 3.6e6
PRICE_OVERRIDE = "--price"


def gpu_table(run: Run, targets: Sequence[GpuSpec], prices: Optional[dict[str, float]] = None,
              progress: Optional[Callable[[str], None]] = None) -> pd.DataFrame:
    """The rows (module doc): the origin's own replay first, then each target not equal to the origin GPU.
    A price for a GPU that is not a row is an error (it would be silently ignored)."""
    origin = run.baseline().gpu
    rest = [t for t in targets if t != origin]
    prices = prices or {}
    unused = sorted(set(prices) - {origin.name, *(t.name for t in rest)})
    if unused:
        raise UsageError(f"--price {unused[0]}: not among the GPUs compared ({origin.name} and --to); "
                         "add it to --to or drop its price")
    dp = run.options.data_parallel  # read here once: the rows say it (SCALEOUT_COLUMNS)
    rows = []
    for target in [None, *rest]:
        replay = run.baseline() if target is None else run.replay(target)
        rows.append(_row(run, replay, prices, dp))
        if progress is not None:
            progress(replay.gpu.name)
    table = pd.DataFrame(rows, columns=list(COLUMNS) + list(SCALEOUT_COLUMNS if dp.active else ()))
    table["speedup"] = table["iteration_ms"].iat[0] / table["iteration_ms"]
    return table


def _row(run: Run, replay: Replay, prices: dict[str, float], dp: DataParallel) -> dict[str, Any]:
    from habitat_trace.analysis.memory import fits

    gpu = replay.gpu
    slow = replay.slowest()
    head = slow.headline
    usd, price_source = _price(gpu, prices)
    peak_gib, mem_source = run_peak_memory(run)
    transfer, wait = collective_split(replay, replay.ranks.index(slow))
    gpus = dp.world_size if slow.scaled_out is not None else len(run.ranks)
    return {**communication(slow, dp),
        "gpu": gpu.name, "origin": replay.target is None,
        "whatif": None if replay.target is None else run.options.deployment.whatif(), "iteration_ms": head.iteration_ms,
        "iteration_low_ms": head.iteration_low_ms, "iteration_high_ms": head.iteration_high_ms,
        "range_source": head.range_source, "gpu_busy_ms": head.gpu_busy_ms,
        "speedup": float("nan"), "bound": "launch" if head.gpu_busy_ms < LAUNCH_BOUND_BUSY * head.iteration_ms
        else "gpu",
        "usd_per_hour": usd, "price_source": price_source,
        "usd_per_1k_iterations": None if usd is None else usd * gpus * head.iteration_ms * 1000 / MS_PER_HOUR,
        "peak_memory_gib": peak_gib, "memory_source": mem_source, "fits_memory": fits(peak_gib, gpu.memory_gib),
        "method_share": method_share(np.concatenate([r.prediction.method for r in replay.ranks]),
                                     np.concatenate([r.prediction.dur_ns for r in replay.ranks])),
        "iteration_source": head.source, "profiler_overhead_ms": overhead_ms(slow.host), "ranks": len(run.ranks),
        "slowest_rank": None if run.single else slow.rank.number, "transfer_ms": transfer, "wait_ms": wait,
        "warnings": list(replay.warnings),
    }


def anchor_note(origin: dict[str, Any]) -> Optional[str]:
    """One line for compare's notes when the origin row (a row of ``gpu_table``) is estimated, the trace holding no
    measured step and none given, and its range is wide (WIDE_RANGE): how wide, and how to anchor it; else None."""
    lo, hi = origin["iteration_low_ms"], origin["iteration_high_ms"]
    if origin["iteration_source"] != "estimated" or not lo > 0 or hi / lo <= WIDE_RANGE:
        return None
    return (f"origin step estimated, nothing anchors it: the real one may be {lo:.2f}-{hi:.2f} ms ({hi / lo:.1f}x); "
            "give it with --measured-step (ms or it/s)")


def communication(rr: RankReplay, dp: DataParallel) -> dict[str, Any]:
    """SCALEOUT_COLUMNS of a scale-out rank (module doc); {} for a recorded run."""
    if rr.scaled_out is None:
        return {}
    fig = rr.scaled_out.communication()
    steps = fig[fig["step"] >= 0] if (fig["step"] >= 0).any() else fig
    return {"world_size": dp.world_size, "strategy": dp.strategy, "collectives": float(steps["collectives"].mean()),
            "comm_ms": float(steps["comm_busy_ns"].mean()) / 1e6,
            "exposed_comm_ms": float(steps["exposed_comm_ns"].mean()) / 1e6}


def collective_split(replay: Replay, position: int) -> tuple[Optional[float], Optional[float]]:
    """(transfer, wait) ms per step of rank ``position``'s matched collectives; (None, None) for one rank."""
    if len(replay.ranks) == 1:
        return None, None
    c = replay.collectives
    mine = c[c["rank"] == position]
    steps = max(len(replay.ranks[position].tables.steps), 1)
    return float(mine["transfer_ns"].sum()) / steps / 1e6, float(mine["wait_ns"].sum()) / steps / 1e6


def run_peak_memory(run: Run) -> tuple[Optional[float], str]:
    """The largest rank's peak memory and its source (memory.peak_memory); "unknown" when no rank shows it."""
    from habitat_trace.analysis.memory import UNKNOWN, peak_memory

    peaks = [peak_memory(r.tables) for r in run.ranks]
    known = [p for p in peaks if p[0] is not None]
    return max(known, key=lambda p: p[0] or 0.0) if known else (None, UNKNOWN)


def method_share(method: np.ndarray, dur_ns: np.ndarray) -> dict[str, float]:
    """Fraction of the target's GPU time predicted by each method (methods with no time left out)."""
    total = float(np.sum(dur_ns))
    out = {}
    for m in METHODS:
        t = float(np.sum(dur_ns[method == m]))
        if t > 0:
            out[m] = t / total
    return out


def _price(target: GpuSpec, overrides: dict[str, float]) -> tuple[Optional[float], Optional[str]]:
    if target.name in overrides:
        return overrides[target.name], PRICE_OVERRIDE
    if target.price is None:
        return None, None
    return float(target.price.usd_per_hour), f"{target.price.provider}, {target.price.date}"

"""``compare(trace, to) -> DataFrame``: one trace against many GPUs — iteration time, speed-up, cost, memory fit.

Pure: loads (or takes) a trace, predicts and replays it on each target, returns one row per GPU with the origin
first (``COLUMNS``); prints and writes nothing. The command (commands/compare.py) formats and plots it.

Definitions (README, "Which GPU should I rent?"):
- ``iteration_ms``: max(mean replayed ProfilerStep span, mean replayed GPU busy time of a
  step), replayed on the target host's clock: the profiler's own overhead removed (pipeline.host_clock), so it is
  the real loop's iteration, not the profiled one. The replayed CPU span keeps a launch-bound step launch-bound
  (its blocking calls end when the GPU work ends on the target); the GPU busy time covers a step without a
  blocking call, whose queue grows until the GPU's pace sets the period. Without ProfilerSteps the whole trace is
  one step (replayed GPU span). On the origin row, a trace that carries its measured un-profiled step time
  (habitat_trace.schedule) reports max(that, the GPU busy time) instead (``iteration_source`` "measured").
- ``bound``: "launch" when the GPU is busy less than ``LAUNCH_BOUND_BUSY`` of the iteration, else "gpu".
- ``usd_per_1k_iterations`` = usd_per_hour x iteration_ms x 1000 / 3.6e6.
- memory: see habitat_trace/analysis/memory.py (recorded peak or estimate, margin rule).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from habitat_trace import pipeline
from habitat_trace.scale.prediction import METHODS

COLUMNS = ("gpu", "iteration_ms", "gpu_busy_ms", "speedup", "bound", "usd_per_hour", "price_source",
           "usd_per_1k_iterations", "peak_memory_gib", "memory_source", "fits_memory", "method_share",
           "iteration_source", "profiler_overhead_ms")
# A GPU busy less than half of the step waits on the CPU (launches, Python, data) more than it computes:
# buying a faster GPU then shortens the step by less than the speed-up of its kernels.
LAUNCH_BOUND_BUSY = 0.5
MS_PER_HOUR = 3.6e6
PRICE_OVERRIDE = "--price"


def compare(trace_or_path: Any, to: list[str], specs: Optional[Path] = None,
            prices: Optional[dict[str, float]] = None, origin: Optional[str] = None,
            progress: Optional[Callable[[str], None]] = None, host: pipeline.Host = pipeline.Host()) -> pd.DataFrame:
    """One row per GPU (origin first, then ``to`` in order, duplicates and the origin's own GPU dropped).

    ``prices`` maps a GPU name (any name the catalog resolves) to USD per hour and overrides the catalog.
    ``progress`` is called with each GPU name after its row is done (the CLI drives a progress bar with it).
    ``host``: the target host (the origin's without the profiler by default; pipeline.Host).
    """
    from habitat_trace.analysis.memory import peak_memory
    from habitat_trace.ingest import load
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    targets = [catalog.resolve(name) for name in to]  # unknown names fail before any work
    overrides = {catalog.resolve(name).name: float(usd) for name, usd in (prices or {}).items()}
    trace = trace_or_path if hasattr(trace_or_path, "gpu") else load(trace_or_path)
    src = pipeline.resolve_origin(trace, catalog, origin)
    peak_gib, mem_source = peak_memory(trace)
    gpus = list(dict.fromkeys([src.name] + [t.name for t in targets]))
    clock = pipeline.host_clock(trace, host)
    rows = []
    for name in gpus:
        rows.append(_row(trace, src, catalog.resolve(name), overrides, peak_gib, mem_source, clock))
        if progress is not None:
            progress(name)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table["speedup"] = table["iteration_ms"].iat[0] / table["iteration_ms"]
    return table


def _row(trace: Any, src: Any, target: Any, overrides: dict[str, float], peak_gib: float | None,
         mem_source: str, clock: pipeline.HostClock) -> dict[str, Any]:
    from habitat_trace.analysis.memory import fits

    scaled = pipeline.scale(trace, src, target, clock=clock)
    prediction = scaled.prediction
    iteration_ms, busy_ms, source = pipeline.headline(scaled)
    usd, price_source = _price(target, overrides)
    return {
        "gpu": target.name, "iteration_ms": iteration_ms, "gpu_busy_ms": busy_ms, "speedup": float("nan"),
        "bound": "launch" if busy_ms < LAUNCH_BOUND_BUSY * iteration_ms else "gpu",
        "usd_per_hour": usd, "price_source": price_source,
        "usd_per_1k_iterations": None if usd is None else usd * iteration_ms * 1000 / MS_PER_HOUR,
        "peak_memory_gib": peak_gib, "memory_source": mem_source,
        "fits_memory": fits(peak_gib, target.memory_gib),
        "method_share": method_share(prediction.method, prediction.dur_ns),
        "iteration_source": source,
        "profiler_overhead_ms": float(np.mean(clock.overhead_per_step_ns)) / 1e6 if len(clock.overhead_per_step_ns)
        else 0.0,
    }


def method_share(method: np.ndarray, dur_ns: np.ndarray) -> dict[str, float]:
    """Fraction of the target's GPU time predicted by each method (methods with no time left out)."""
    total = float(np.sum(dur_ns))
    out = {}
    for m in METHODS:
        t = float(np.sum(dur_ns[method == m]))
        if t > 0:
            out[m] = t / total
    return out


def _price(target: Any, overrides: dict[str, float]) -> tuple[Optional[float], Optional[str]]:
    if target.name in overrides:
        return overrides[target.name], PRICE_OVERRIDE
    if target.price is None:
        return None, None
    return float(target.price.usd_per_hour), f"{target.price.provider}, {target.price.date}"


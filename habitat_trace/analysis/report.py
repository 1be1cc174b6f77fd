"""``summarize(trace, top, headline) -> dict``: what ``inspect`` shows of one trace, as plain JSON-ready data (no
printing); ``headline`` is the trace's own replay's (pipeline.run.Headline, from the caller's run: a directory's
ranks replayed jointly, with the run's catalog and --from), the origin step compare's first row reports.

Times are milliseconds (floats) for display; counts are ints; fractions are in [0, 1]. Warnings
about what the trace lacks travel in the result's ``warnings`` list.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import Tables
from habitat_trace.timeline.steps import step_figures

if TYPE_CHECKING:
    from habitat_trace.pipeline.run import Headline

NS_PER_MS = 1e6
SHORT_NAME_CHARS = 80  # enough for "namespace::kernel_name" of cuDNN/cuBLAS kernels, short enough for a table
META_KEYS = ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version", "record_shapes",
             "baseTimeNanoseconds")


def summarize(trace: Tables, top: int = 10, headline: Optional[Headline] = None) -> dict[str, Any]:
    """Origin GPU, trace format, per-step figures, kernels by class, top kernels, field coverage, the profiler's
    overhead and the origin step (``headline``; nulls without it)."""
    gpu = trace.gpu
    cov = coverage(trace)
    overhead = profiler_overhead(trace, headline)
    return {
        "file": str(trace.path),
        "prediction": prediction(trace),
        "origin": origin(trace),
        "format": trace_format(trace),
        "steps": steps(trace),
        "kernels": {
            "count": int(len(gpu)),
            "total_ms": float(gpu[S.DUR].sum()) / NS_PER_MS,
            "streams": sorted(int(s) for s in gpu[S.STREAM].unique()),
            "by_class": by_class(gpu),
            "top": top_kernels(gpu, top),
        },
        "coverage": cov,
        "profiler_overhead": overhead,
        "warnings": warnings(trace, cov) + [f"profiler overhead: {w}" for w in overhead["warnings"]],
    }


def prediction(trace: Tables) -> dict[str, Any] | None:
    """For a trace ``scale`` wrote (its ``habitat_trace`` key): which GPU it predicts, from which origin and
    input; None for a measured trace. (Its deviceProperties describe the target, so ``origin`` below is the
    target GPU.)"""
    info = trace.meta.get("habitat_trace")
    if not isinstance(info, dict):
        return None
    return {k: info.get(k) for k in ("target", "origin", "input", "version")}


def origin(trace: Tables) -> dict[str, Any]:
    props = trace.device_properties
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    return {
        "name": trace.device_name,
        "sms": props.get("numSms"),
        "compute_capability": f"{major}.{minor}" if major is not None and minor is not None else None,
        "memory_bytes": props.get("totalGlobalMem"),
        "devices_in_trace": sorted(int(d) for d in trace.gpu[S.DEVICE].unique()),
    }


def trace_format(trace: Tables) -> dict[str, Any]:
    out: dict[str, Any] = {k: trace.meta[k] for k in META_KEYS if k in trace.meta}
    first = int(trace.gpu[S.EVENT].iat[0]) if len(trace.gpu) else None
    legacy = first is not None and trace.events[first].get("cat") == "Kernel"
    out["layout"] = "kineto-2021 (Kernel/Runtime/Operator categories)" if legacy else "kineto"
    out["events"] = len(trace.events)
    return out


def steps(trace: Tables) -> dict[str, Any]:
    table = step_figures(trace.steps, trace.gpu).table
    rows = [{
        "number": int(r.number), "cpu_ms": r.cpu_ns / NS_PER_MS, "gpu_busy_ms": r.gpu_busy_ns / NS_PER_MS,
        "gpu_span_ms": r.gpu_span_ns / NS_PER_MS, "kernels": int(r.kernels),
    } for r in table.itertuples()]
    mean = {k: float(np.mean([r[k] for r in rows])) if rows else 0.0
            for k in ("cpu_ms", "gpu_busy_ms", "gpu_span_ms", "kernels")}
    return {"count": len(trace.steps), "pseudo_step": len(trace.steps) == 0, "per_step": rows, "mean": mean}


def profiler_overhead(trace: Tables, headline: Optional[Headline] = None) -> dict[str, Any]:
    """The profiler's own host overhead per step (timeline/overhead.py) and what the estimate rests on; the
    measured un-profiled step when the trace carries one (habitat_trace.schedule); and the origin's real step
    that compare's first row reports, with its range (origin_step()), so inspect and compare say one thing."""
    from habitat_trace.pipeline import measured_step_ns
    from habitat_trace.timeline import overhead

    est = overhead.estimate(trace, one_clock=True)
    ev = est.evidence
    measured = measured_step_ns(trace)
    return {**origin_step(headline),
        "per_step_ms": [float(v) / NS_PER_MS for v in est.per_step_ns],
        "mean_ms": float(np.mean(est.per_step_ns)) / NS_PER_MS if len(est.per_step_ns) else 0.0,
        "record_shapes": ev.record_shapes, "with_stack": ev.with_stack, "profile_memory": ev.profile_memory,
        "host_unit_ns": ev.unit_ns, "host_unit_measured": ev.unit_measured,
        "measured_unprofiled_step_ms": None if measured is None else measured / NS_PER_MS,
        "warnings": list(est.warnings),
    }


def origin_step(h: Optional[Headline]) -> dict[str, Any]:
    """compare's origin row (pipeline.Run's headline on the origin GPU): ``origin_step_ms`` and its range
    (``origin_step_low_ms``, ``origin_step_high_ms``, ``range_source``); nulls without it (the origin GPU is not in
    the catalog, so compare would need --from, or the trace has no GPU events to replay)."""
    if h is None:
        return {"origin_step_ms": None, "origin_step_low_ms": None, "origin_step_high_ms": None,
                "range_source": None}
    return {"origin_step_ms": h.iteration_ms, "origin_step_low_ms": h.iteration_low_ms,
            "origin_step_high_ms": h.iteration_high_ms, "range_source": h.range_source}


def by_class(gpu: pd.DataFrame) -> list[dict[str, Any]]:
    """Count and summed duration per kernel class, largest time first."""
    if len(gpu) == 0:
        return []
    total = float(gpu[S.DUR].sum()) or 1.0
    g = gpu.groupby(S.KCLASS, sort=False)[S.DUR].agg(["count", "sum"]).sort_values("sum", ascending=False)
    return [{"class": str(c), "count": int(r["count"]), "total_ms": float(r["sum"]) / NS_PER_MS,
             "share": float(r["sum"]) / total} for c, r in g.iterrows()]


def top_kernels(gpu: pd.DataFrame, top: int) -> list[dict[str, Any]]:
    """The ``top`` GPU events by summed duration, grouped by full name; the launching op is the most common one."""
    if len(gpu) == 0 or top <= 0:
        return []
    g = gpu.groupby(S.NAME, sort=False)
    agg = g[S.DUR].agg(["count", "sum"]).sort_values("sum", ascending=False, kind="stable").head(top)
    rows = []
    for name, r in agg.iterrows():
        part = gpu[gpu[S.NAME] == name]
        ops = part[S.OP_NAME][part[S.OP_NAME] != ""]
        rows.append({
            "name": short_name(str(name)), "full_name": str(name), "count": int(r["count"]),
            "total_ms": float(r["sum"]) / NS_PER_MS, "class": str(part[S.KCLASS].mode().iat[0]),
            "op": str(ops.mode().iat[0]) if len(ops) else "",
        })
    return rows


def short_name(name: str, width: int = SHORT_NAME_CHARS) -> str:
    """Kernel name without ``void``, template arguments and the trailing parameter list, cut to ``width``.

    ``(anonymous namespace)::`` stays: only a parenthesized group that ends the name is a parameter list.
    """
    s = name[5:] if name.startswith("void ") else name
    out, depth = [], 0
    for ch in s:  # drop <...> at any nesting depth
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    s = "".join(out).strip()
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i].rstrip() if i > 0 else s
                break
    s = s or name
    return s if len(s) <= width else s[: width - 1] + "…"


def coverage(trace: Tables) -> dict[str, Any]:
    """Fractions of kernels with launch parameters, registers, a launch call, an op, and shapes on that op."""
    gpu = trace.gpu
    k = gpu[gpu[S.CAT] == S.CAT_KERNEL]
    if len(k) == 0:
        return {"kernels": 0}
    dims = trace.ops[S.INPUT_DIMS].to_numpy(dtype=object) if len(trace.ops) else np.array([], dtype=object)
    op = k[S.OP].to_numpy()
    has_op = op != S.NONE
    shaped = np.zeros(len(k), dtype=bool)
    if has_op.any():
        shaped[has_op] = [d is not None and d != [] for d in dims[op[has_op]]]
    return {
        "kernels": int(len(k)),
        "launch_params": _frac((k[S.GRID_X] > 0) & (k[S.BLOCK_X] > 0)),
        "registers": _frac(k[S.REGISTERS] > 0),
        "launch_call": _frac(k[S.LAUNCH] != S.NONE),
        "op": _frac(has_op),
        "input_dims": _frac(shaped),
        "step": _frac(k[S.STEP] != S.NONE),
    }


def _frac(mask: Any) -> float:
    return float(np.mean(mask))


def warnings(trace: Tables, cov: dict[str, Any]) -> list[str]:
    out = []
    if prediction(trace):
        out.append("a prediction written by habitat-trace scale, not a measurement: scale or compare the trace "
                   "measured on the origin GPU instead")
    if trace.device_name is None:
        out.append("no deviceProperties: the origin GPU is unknown; pass --from when scaling")
    if len(trace.steps) == 0:
        out.append("no ProfilerStep annotations: the whole trace is reported as one pseudo-step")
    if cov.get("kernels") and cov["launch_params"] < 1.0:
        out.append(f"{1 - cov['launch_params']:.0%} of kernels lack grid/block (CUPTI launch parameters)")
    if cov.get("kernels") and cov["input_dims"] == 0.0:
        out.append("no input shapes recorded (profile with record_shapes=True for shape-aware scaling)")
    return out

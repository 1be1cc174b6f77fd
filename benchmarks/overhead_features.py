"""Per-trace features of the profiler's cost, and the per-step overhead each origin row needed (issue 31).

    PYTHONPATH=. python benchmarks/overhead_features.py [--out benchmarks/results/profiler_overhead/features.csv]

For every trace with an un-profiled measurement on this machine: ../shared/data/traces and benchmarks/traces (the
measured loop: median_ms, steady_wall_ms), and the calibration runs' variant-(a) traces (benchmarks/traces/overhead,
the host issue time of benchmarks/results/profiler_overhead/*_overhead.jsonl). Per row, means over the trace's steady
steps: the counts a profiler cost could grow with (ops, ops with shapes, recorded inputs and dims, runtime calls,
launches, kernels, nesting depth, leaf ops), the host's own time outside calls (overhead.host_free_ns; also with each
op's share capped at FREE_CAPS_U x u), the host's pace (u, the median launch call), the model's overhead and
origin row, and the overhead the row needed: ``needed = model + (origin row - measured)`` (host-bound rows, where
one ms less host time is one ms less step; the measured loop is the nearer of its median and steady wall time). For
the calibration rows ``needed`` is measured directly: profiled minus un-profiled issue time. benchmarks/overhead_
candidates.py fits and scores candidate models on these rows, grouped by workload family and by host.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import accuracy as A
import overhead_eval
from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.pipeline.figures import steady
from habitat_trace.scale.specs import load_catalog
from habitat_trace.timeline import overhead as OH
from habitat_trace.timeline.steps import step_figures

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION = ROOT / "benchmarks/results/profiler_overhead"
OUT = CALIBRATION / "features.csv"
FOREACH = re.compile(r"_foreach_|aten::cat|aten::stack")  # list-of-tensor ops: one record per listed tensor


def family(workload: str) -> str:
    """The workload family a leave-one-family-out fold holds out: the model's name, without batch, precision or
    recording suffixes (resnet50_b64_amp and resnet50_b64_fp32 are one family)."""
    base = workload.split("__")[0]
    for prefix in ("compiled_", "cudagraph_"):
        base = base.removeprefix(prefix)
    return re.split(r"_(?:b\d|d\d|w\d|c\d|top\d|n\d|l\d)", base, maxsplit=1)[0]


def host_of(device_name: str, path: str) -> str:
    return "h200" if "H200" in device_name or "h200" in path else "h100"


def count_features(trace: object, keep: np.ndarray) -> dict:
    """Per-step means over the steady steps ``keep`` (rows of trace.steps) of the counts a cost could follow."""
    ops, calls, gpu = trace.ops, trace.calls, trace.gpu  # type: ignore[attr-defined]
    n = max(int(keep.sum()), 1)
    in_keep = np.zeros(len(keep) + 1, dtype=bool)
    in_keep[:-1] = keep
    step = ops[S.STEP].to_numpy(dtype=np.int64)
    is_step = ops[S.NAME].astype(str).str.startswith(OH.STEP_PREFIX).to_numpy()
    sel = ~is_step & (step >= 0) & in_keep[np.where(step >= 0, step, len(keep))]
    o = ops[sel]
    dims = o[S.INPUT_DIMS].to_numpy(dtype=object) if S.INPUT_DIMS in o else np.full(len(o), None)
    n_inputs = np.array([len(d) if isinstance(d, (list, tuple)) else 0 for d in dims])
    n_dims = np.array([sum(len(x) if isinstance(x, (list, tuple)) else 0 for x in d)
                       if isinstance(d, (list, tuple)) else 0 for d in dims])
    n_tensors = np.array([sum(1 for x in d if isinstance(x, (list, tuple)) and len(x) > 0)
                          if isinstance(d, (list, tuple)) else 0 for d in dims])
    parent = ops[S.PARENT].to_numpy(dtype=np.int64)
    has_child = np.zeros(len(ops), dtype=bool)
    has_child[parent[parent >= 0]] = True
    depth = o[S.DEPTH].to_numpy(dtype=float)
    names = o[S.NAME].astype(str)
    cstep = calls[S.STEP].to_numpy(dtype=np.int64) if len(calls) else np.zeros(0, np.int64)
    csel = (cstep >= 0) & in_keep[np.where(cstep >= 0, cstep, len(keep))]
    launch = calls[S.NAME].isin(OH.LAUNCH_CALLS).to_numpy() & csel
    gstep = gpu[S.STEP].to_numpy(dtype=np.int64) if len(gpu) else np.zeros(0, np.int64)
    gsel = (gstep >= 0) & in_keep[np.where(gstep >= 0, gstep, len(keep))]
    dur = o[S.DUR].to_numpy(dtype=float)
    return dict(n_ops=len(o) / n, n_shapes=float((n_inputs > 0).sum()) / n, n_inputs=float(n_inputs.sum()) / n,
                n_tensors=float(n_tensors.sum()) / n, n_dims=float(n_dims.sum()) / n,
                n_foreach_inputs=float(n_inputs[names.str.contains(FOREACH).to_numpy()].sum()) / n,
                n_calls=float(csel.sum()) / n, n_launch=float(launch.sum()) / n, n_kernels=float(gsel.sum()) / n,
                n_leaf=float((~has_child[np.flatnonzero(sel)]).sum()) / n, n_top=float((depth <= 1).sum()) / n,
                depth_mean=float(depth.mean()) if len(depth) else 0.0,
                n_threads=float(o[S.TID].nunique()), op_ms=float(dur[depth <= 1].sum()) / n / 1e6)


FREE_CAPS_U = (8, 16, 32, 64)  # candidate caps on one op's host time, in units of u (overhead_candidates.py)


def free_ms(trace: object, keep: np.ndarray, unit_ns: int) -> dict:
    """Mean over the steps ``keep`` of the host's own time outside runtime/driver calls, as the model reads it
    (overhead.host_free_ns of the steps' ops, all threads on one clock): uncapped, and each op's share capped at
    FREE_CAPS_U x u."""
    ops, calls = trace.ops.assign(**{S.TID: 0}), trace.calls.assign(**{S.TID: 0})  # type: ignore[attr-defined]
    free = OH.host_free_ns(ops, calls).astype(float)
    step = ops[S.STEP].to_numpy(dtype=np.int64)
    ok = (step >= 0) & (step < len(keep)) & ~ops[S.NAME].astype(str).str.startswith(OH.STEP_PREFIX).to_numpy()
    out = {}
    for cap in (None, *FREE_CAPS_U):
        f = free if cap is None else np.minimum(free, cap * unit_ns)
        per_step = np.bincount(step[ok], weights=f[ok], minlength=len(keep))[:len(keep)]
        name = "free_ms" if cap is None else f"free_cap{cap}_ms"
        out[name] = float(per_step[keep].mean()) / 1e6 if keep.any() else 0.0
    return out


def pace(trace: object, est: OH.OverheadEstimate) -> dict:
    calls = trace.calls  # type: ignore[attr-defined]
    d = calls.loc[calls[S.NAME].isin(OH.LAUNCH_CALLS), S.DUR].to_numpy(dtype=float)
    return dict(u_ns=est.evidence.unit_ns, launch_p50_ns=float(np.median(d)) if len(d) else 0.0,
                launch_p10_ns=float(np.quantile(d, 0.1)) if len(d) else 0.0,
                record_shapes=est.evidence.record_shapes, with_stack=est.evidence.with_stack)


def loop_row(catalog: object, label: str, folder: Path, r: dict) -> dict:
    """A ground-truth trace: its features, the model's origin row and the overhead the row needed."""
    trace = load(folder / r["trace"])
    origin = catalog.for_device(trace.device_name)  # type: ignore[attr-defined]
    head = A.replayed(catalog, trace, origin, origin).headline
    est = OH.estimate(trace, one_clock=True)
    fig = step_figures(trace.steps, trace.gpu).table  # type: ignore[attr-defined]
    keep = steady(fig["number"].to_numpy())
    med, stdy = float(r["median_ms"]), float(r.get("steady_wall_ms") or r["median_ms"])
    pred = head.iteration_ms
    target = min(max(pred, min(med, stdy)), max(med, stdy))
    model = float(est.per_step_ns[keep].mean()) / 1e6
    row = dict(set=label, trace=r["trace"], workload=r["workload"], family=family(r["workload"]),
               host=host_of(trace.device_name, r["trace"]),
               profiled_ms=float(fig["cpu_ns"].to_numpy()[keep].mean()) / 1e6,
               busy_ms=float(fig["gpu_busy_ns"].to_numpy()[keep].mean()) / 1e6, measured_median_ms=med,
               measured_steady_ms=stdy, origin_ms=pred, model_ms=model, needed_ms=model + pred - target,
               error_pct=A.judged_error(pred, med, stdy),
               launch_bound=float(r["trace_kernel_ms"]) < A.LAUNCH_BOUND_KERNEL_SHARE * (med + stdy) / 2)
    row.update(pace(trace, est), **free_ms(trace, keep, est.evidence.unit_ns))
    row.update(count_features(trace, keep))
    return row


def calibration_rows() -> list[dict]:
    """The calibration runs' variant (a): needed = profiled - un-profiled host issue time, measured."""
    out = []
    for path in sorted(CALIBRATION.glob("*_overhead.jsonl")):
        host = path.name.split("-")[0]
        recs = {(r["workload"], r["variant"]): r for r in map(json.loads, path.open())}
        for (w, v), r in sorted(recs.items()):
            tpath = ROOT / "benchmarks/traces/overhead" / path.name.split("_")[0] / f"{w}.pt.trace.json.gz"
            if v != "a_shapes" or not tpath.exists():
                continue
            trace = load(tpath)
            est = OH.estimate(trace, one_clock=True)
            keep = np.ones(len(trace.steps), dtype=bool)  # type: ignore[attr-defined]
            base = recs[(w, "none")]["issue_ms"]
            row = dict(set="calibration", trace=str(tpath.relative_to(ROOT)), workload=w, family=family(w), host=host,
                       profiled_ms=r["prof_issue_ms"], busy_ms=0.0, measured_median_ms=base, measured_steady_ms=base,
                       origin_ms=float("nan"), model_ms=float(est.per_step_ns.mean()) / 1e6,
                       needed_ms=r["prof_issue_ms"] - base, error_pct=float("nan"), launch_bound=True)
            row.update(pace(trace, est), **free_ms(trace, keep, est.evidence.unit_ns))
            row.update(count_features(trace, keep))
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    catalog = load_catalog(A.SM_SPECS)
    rows = calibration_rows()
    for label, folder, r, _ in overhead_eval.traces_with_truth():  # with the no_record_shapes twins
        rows.append(loop_row(catalog, label, folder, r))
        print(f"{label} {r['trace']}: err {rows[-1]['error_pct']:+.1f}%", file=sys.stderr)
    pd.DataFrame(rows).to_csv(a.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

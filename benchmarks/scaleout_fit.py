"""The host costs of scale/dp_host.py, fitted from rank traces (issue 31): FSDP2's per-unit hooks, its optimizer over
DTensors, and DDP's per-bucket all-reduce issue, each in the fixed host unit u = dp_host.HOST_UNIT_NS.

    python benchmarks/scaleout_fit.py RUN [RUN ...] [--out benchmarks/results/scaleout/fit.md]

RUN: a folder collect_distributed.py wrote, with its traces unpacked under RUN/traces (or as the xz parts). For
every FSDP2 rank trace (``fsdp-w<N>``) and every instance of a hook in its last profiled step: the recorded
duration less the profiler's overhead of the events inside it (overhead.estimate's per-op costs), over u, against
the unit's parameter count (its fsdp::all_gather_copy_in / fsdp::chunk_cat tensor list); least squares cost = a + b x
parameters per hook. The optimizer: per parameter per foreach op of the one-GPU trace's step.
DDP (``ddp-w<N>``): every c10d::allreduce_ (the bucket's issue: record_param_comms, the NCCL launch, the events
between the streams), the same way, one constant; the copy-out window from the backward's end to Optimizer.step per
gradient, less the one-GPU trace's same window, DistributedDataParallel.forward's own time and its broadcast of the
module's buffers, a + b x buffers (window_rows).
Leave-one-workload-out: each coefficient refitted without each workload; the table gives the spread, so a reader sees
how much one workload moves it.
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from habitat_trace.ingest import schema as S  # noqa: E402
from habitat_trace.ingest.trace import load  # noqa: E402
from habitat_trace.scale.dp_host import HOST_UNIT_NS  # noqa: E402
from habitat_trace.scale.params import EVALUATE, recover  # noqa: E402
from habitat_trace.timeline import overhead  # noqa: E402

HOOKS = {"FSDP::pre_forward": "pre_forward", "FSDP::post_forward": "post_forward",
         "FSDP::pre_backward": "pre_backward", "RegisterPostBackwardFunctionBackward": "post_backward",
         "FSDP::root_post_backward_callback": "root_callback", "Optimizer.step": "optimizer",
         "c10d::allreduce_": "ddp_allreduce",
         "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad": "ddp_accumulate",
         "FullyShardedDataParallel._pre_forward": "fsdp1_pre_forward",
         "FullyShardedDataParallel._post_forward": "fsdp1_post_forward",
         "FullyShardedDataParallel._pre_backward_hook": "fsdp1_pre_backward",
         "FullyShardedDataParallel._post_backward_hook": "fsdp1_post_backward"}
# FSDP1's limit_all_gathers: the CPU waits in it for an all-gather two units back to be freed (event.synchronize),
# a wait, not work: its time inside a hook is taken out
RATE_LIMITER = "FullyShardedDataParallel.rate_limiter"
ALLREDUCE = "c10d::allreduce_"  # inside the AccumulateGrad node that completes a bucket: priced per bucket
UNIT_LISTS = ("fsdp::all_gather_copy_in", "fsdp::chunk_cat")  # their first input: the unit's parameters
PER_PARAM = ("pre_forward", "pre_backward", "post_backward", "ddp_buffers")
DDP_FORWARD = "DistributedDataParallel.forward"
COPY_TO_GRAD = "torch.distributed.ddp.reducer::copy_bucket_to_grad"
# DDP's buffer broadcast at the forward's start (torch/nn/parallel/distributed.py _sync_buffers ->
# dist._broadcast_coalesced; torch/csrc/distributed/c10d/comm.cpp broadcast_coalesced): the ops it records
BUFFER_SYNC = ("aten::flatten_dense_tensors", "c10d::broadcast_", "record_param_comms", "aten::unflatten_dense_tensors",
               "aten::copy_")


def kind_of(name: str) -> Optional[str]:
    return next((v for k, v in HOOKS.items() if name == k or name.startswith((k + " ", k + "#"))), None)


def read(path: Path) -> tuple[Any, overhead.OverheadEstimate]:
    """A rank trace's tables and its profiler-overhead estimate, which hook_rows and window_rows both read."""
    t = load(path)
    return t, overhead.estimate(t, one_clock=True)


def hook_rows(t: Any, est: overhead.OverheadEstimate) -> list[dict[str, Any]]:
    """One row per hook instance of the trace's last profiled step (module doc)."""
    o = t.ops.reset_index(drop=True)
    ts, end, tid, names = (o[c].to_numpy() for c in (S.TS, S.END, S.TID, S.NAME))
    lists = np.flatnonzero(np.isin(names, UNIT_LISTS))
    waits = np.flatnonzero((names == RATE_LIMITER) | (names == ALLREDUCE))
    rows = []
    for i in np.flatnonzero((o[S.STEP] == o[S.STEP].max()).to_numpy()):
        kind = kind_of(str(names[i]))
        if kind is None:
            continue
        inside = (ts >= ts[i]) & (end <= end[i]) & (tid == tid[i])
        own = [j for j in lists if inside[j]]
        dims = o.at[own[0], S.INPUT_DIMS] if own else None
        nparams = len(dims[0]) if isinstance(dims, list) and dims and isinstance(dims[0], list) else -1
        waited = int(sum(end[j] - ts[j] for j in waits if inside[j] and j != i))
        rows.append({"kind": kind, "nparams": nparams, "dur_ns": int(end[i] - ts[i]) - waited,
                     "overhead_ns": int(est.op_ns[inside].sum()), "u_ns": est.evidence.unit_ns})
    return rows


def window_rows(t: Any, est: overhead.OverheadEstimate, ddp: bool) -> list[dict[str, Any]]:
    """DDP's host time outside its hooks' own record_functions, in the trace's last profiled step:
    ``ddp_copy_out`` (DDP) / ``single_copy_window`` (one GPU): the whole window from the backward's last node to
    Optimizer.step, where DDP's finalize_backward runs copy_bucket_to_grad once per gradient (nparams: how many);
    the annotations alone miss the reducer's loop between them. ``ddp_forward``: DistributedDataParallel.forward's
    own time before its first op and after its last (_pre_forward, the buffers' broadcast set-up, _post_forward).
    The profiler's overhead of the events inside (overhead.estimate) is taken out of both."""
    o = t.ops.reset_index(drop=True)
    ts, end, tid = (o[c].to_numpy() for c in (S.TS, S.END, S.TID))
    names = o[S.NAME].astype(str).to_numpy()
    step = (o[S.STEP] == o[S.STEP].max()).to_numpy()
    bwd = step & np.array([n.startswith(EVALUATE) for n in names])
    opt = step & np.array([n.startswith("Optimizer.step") for n in names])
    if not bwd.any() or not opt.any():
        return []
    a, b = int(end[bwd].max()), int(ts[opt].min())
    inside = step & (ts >= a) & (ts < b)
    copies = int((inside & (names == COPY_TO_GRAD)).sum())
    rows = [{"kind": "ddp_copy_out" if ddp else "single_copy_window", "nparams": copies, "dur_ns": b - a,
             "overhead_ns": int(est.op_ns[inside].sum()), "u_ns": est.evidence.unit_ns}]
    depth = o[S.DEPTH].to_numpy()
    for i in np.flatnonzero(step & (names == DDP_FORWARD)) if ddp else []:
        kids = step & (tid == tid[i]) & (ts > ts[i]) & (end <= end[i])
        if kids.any():
            own = int(ts[kids].min() - ts[i]) + int(end[i] - end[kids].max())
            rows.append({"kind": "ddp_forward", "nparams": -1, "dur_ns": own, "overhead_ns": int(est.op_ns[i]),
                         "u_ns": est.evidence.unit_ns})
            rows += _buffer_sync(names, ts, est, np.flatnonzero(kids & (depth == depth[i] + 1)), kids)
    return rows


def _buffer_sync(names: np.ndarray, ts: np.ndarray, est: overhead.OverheadEstimate, children: np.ndarray,
                 kids: np.ndarray) -> list[dict[str, Any]]:
    """``ddp_buffers``: the broadcast of the module's buffers that opens DistributedDataParallel.forward (its leading
    children in BUFFER_SYNC: flatten per dtype, broadcast, unflatten, a copy_ back into each buffer), from its first op
    to the module's first op, the profiler's overhead of every event inside taken out; nparams: the buffers (the
    copies). None where the module has no buffers (the forward opens with a module op)."""
    order = children[np.argsort(ts[children], kind="stable")]
    sync = list(itertools.takewhile(lambda j: names[j] in BUFFER_SYNC, order))
    if not sync or len(sync) == len(order):
        return []
    a, b = int(ts[sync[0]]), int(ts[order[len(sync)]])
    inside = kids & (ts >= a) & (ts < b)
    return [{"kind": "ddp_buffers", "nparams": int(sum(names[j] == "aten::copy_" for j in sync)), "dur_ns": b - a,
             "overhead_ns": int(est.op_ns[inside].sum()), "u_ns": est.evidence.unit_ns}]


def optimizer_shape(path: Path) -> tuple[int, int]:
    """(parameters, foreach ops per step) of a one-GPU trace's optimizer."""
    t = load(path)
    f = recover(t)
    o = t.ops[t.ops[S.STEP] == t.ops[S.STEP].max()]
    opt = o[o[S.NAME].str.startswith("Optimizer.step")]
    if not len(opt):
        return len(f.of_step(f.steps[0])), 1
    a, b = int(opt[S.TS].iat[0]), int(opt[S.END].iat[0])
    inside = o[(o[S.TS] >= a) & (o[S.END] <= b)]
    return len(f.of_step(f.steps[0])), max(int(inside[S.NAME].str.startswith("aten::_foreach_").sum()), 1)


def collect(runs: list[Path]) -> pd.DataFrame:
    """Every hook instance of every run's DDP, FSDP2 and FSDP1 rank traces (a run without the workload's one-GPU
    trace, as collect_distributed.py's --modes fsdp1 alone writes, takes it from another run)."""
    singles = {wl.name: s for run in runs for wl in sorted((run / "traces").iterdir())
               for s in sorted((wl / "single").glob("rank0.pt.trace.json*"))[:1]}
    singles_run = {name: path.parents[3].name for name, path in singles.items()}
    rows = []
    for run in runs:
        for wl in sorted(p for p in (run / "traces").iterdir() if p.is_dir()):
            shape = optimizer_shape(singles[wl.name]) if wl.name in singles else (-1, 1)
            for folder in sorted(p for p in wl.iterdir() if p.is_dir()):
                mode = folder.name.split("-w")[0]
                if mode == "single" and run.name != singles_run.get(wl.name):
                    continue
                for trace in sorted(folder.glob("rank*.pt.trace.json*")):
                    t, est = read(trace)
                    windows = window_rows(t, est, mode == "ddp") if mode in ("ddp", "single") else []
                    for r in hook_rows(t, est) + windows:
                        if r["kind"] == "ddp_accumulate" and mode == "single":  # the same node without DDP
                            r["kind"] = "single_accumulate"
                        elif MODE_OF.get(r["kind"].split("_")[0], "fsdp") != mode:
                            continue
                        rows.append({"run": run.name, "workload": wl.name, "mode": folder.name, **r,
                                     "model_params": shape[0], "foreach_ops": shape[1]})
    df = pd.DataFrame(rows)
    # in the fixed host unit (dp_host.HOST_UNIT_NS), not the trace's own u: u moves with the workload's op mix
    # (305-920 ns over the one-GPU traces of one host session), which is not the host's speed
    df["y_u"] = (df["dur_ns"] - df["overhead_ns"]) / HOST_UNIT_NS
    return df


# a hook kind's first word -> the mode whose traces it is read from
MODE_OF = {"ddp": "ddp", "fsdp1": "fsdp1", "single": "single"}


def fit(df: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """(a, b) per hook kind in u (b: per parameter; the optimizer's per parameter per foreach op)."""
    out: dict[str, tuple[float, float]] = {}
    for kind, g in df.groupby("kind"):
        if kind in PER_PARAM and kind != "post_forward":  # post_forward holds no parameter list: per unit
            g = g[g["nparams"] >= 0]
            a, b = np.linalg.lstsq(np.c_[np.ones(len(g)), g["nparams"].to_numpy(dtype=float)], g["y_u"].to_numpy(),
                                   rcond=None)[0]
            out[kind] = (float(a), float(b))
        elif kind == "ddp_copy_out":  # per gradient: the window less the one-GPU step's own, over the gradients
            base = df[df["kind"] == "single_copy_window"].groupby("workload")["y_u"].median()
            per = [(float(np.median(h["y_u"])) - float(base.get(w, 0.0))) / max(float(np.median(h["nparams"])), 1.0)
                   for w, h in g.groupby("workload")]
            out[kind] = (0.0, float(np.median(per)))
        elif kind == "single_copy_window":
            continue
        elif kind == "optimizer":
            per = g.groupby("workload").apply(lambda h: float(np.median(h["y_u"])) /
                                              max(h["model_params"].iat[0] * h["foreach_ops"].iat[0], 1))
            out[kind] = (0.0, float(np.median(per)))
        else:  # once per step, bucket or FSDP1 unit: the median over workloads of each workload's median
            out[kind] = (float(np.median(g.groupby("workload")["y_u"].median())), 0.0)
    return out


def report(df: pd.DataFrame) -> str:
    full = fit(df)
    held = {w: fit(df[df["workload"] != w]) for w in sorted(df["workload"].unique())}
    lines = ["# Host costs of DDP and FSDP2, fitted from rank traces (benchmarks/scaleout_fit.py)", "",
             f"Runs: {', '.join(sorted(df['run'].unique()))}; {len(df)} hook instances, "
             f"{df['workload'].nunique()} workloads; u = {HOST_UNIT_NS} ns (dp_host.HOST_UNIT_NS; the traces' own "
             f"trivial-op time {int(df['u_ns'].min())}-{int(df['u_ns'].max())} ns).",
             "", "| hook | a (u) | b (u per parameter) | a, leave one workload out | b, leave one workload out |",
             "|---|---:|---:|---|---|"]
    for kind, (a, b) in full.items():
        la = [v[kind][0] for v in held.values() if kind in v]
        lb = [v[kind][1] for v in held.values() if kind in v]
        lines.append(f"| {kind} | {a:.0f} | {b:.1f} | {min(la):.0f}-{max(la):.0f} | {min(lb):.1f}-{max(lb):.1f} |")
    lines += ["", "Optimizer: b is per parameter per foreach op of the one-GPU step. post_forward: a per unit; "
              "ddp_allreduce, ddp_forward and root_callback: a per bucket / per step / per step; ddp_buffers: a per step, b "
              "per buffer (the broadcast of the module's buffers that opens DDP's forward); ddp_copy_out: b per "
              "gradient, the window from the backward's end to Optimizer.step less the one-GPU trace's same window "
              "(single_copy_window); fsdp1_*: a per unit (FSDP1 flattens a unit's "
              "parameters into one), its rate limiter's wait taken out.", "",
              "Per workload (median y in u):", "",
              _markdown(df.groupby(["kind", "workload"])["y_u"].median().unstack(0).round(0))]
    return "\n".join(lines) + "\n"


def _markdown(t: pd.DataFrame) -> str:
    head = "| workload | " + " | ".join(map(str, t.columns)) + " |\n|---|" + "---:|" * len(t.columns) + "\n"
    return head + "".join(f"| {i} | " + " | ".join("-" if pd.isna(v) else f"{v:.0f}" for v in r) + " |\n"
                          for i, r in zip(t.index, t.to_numpy()))


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "scaleout" / "fit.md")
    p.add_argument("--reuse", action="store_true", help="refit from the CSV a previous run wrote beside --out")
    args = p.parse_args(argv)
    cached = args.out.with_suffix(".csv")
    df = pd.read_csv(cached) if args.reuse and cached.exists() else collect(args.runs)
    text = report(df)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    df.to_csv(args.out.with_suffix(".csv"), index=False)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

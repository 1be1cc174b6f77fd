"""Compare a predicted trace (written by ``scale``) with one measured on the target GPU.

Steps are matched in order (the i-th ProfilerStep of each); ops by root-op name and occurrence
within the step; kernels by launch order within their matched op, by name first and position
second, so a library that picked a different kernel on the target still pairs up. Errors are
predicted / measured - 1. The step figures are rows ``gpu_busy``, ``gpu_span``, ``cpu_step`` and ``iteration``, each
with ``predicted_ms``, ``measured_ms`` and ``error_pct``.

Like is compared with like (issue 16): a prediction ``scale`` wrote without the profiler's overhead (its default) is
compared with the measured trace's own de-profiled timeline (pipeline.Run's replay of it on its GPU: the same overhead
model, or the un-profiled step the trace carries when recorded with habitat_trace.schedule); a prediction written
with ``--keep-profiler-overhead`` with the measured trace as recorded. ``iteration`` compares the steady iteration
(pipeline.steady_iteration) of both; its ``measured_source`` says whether the measured side is the real loop
("measured": the trace carries it), an estimate with the profiler's overhead removed ("estimated"), or the
profiled trace ("profiled").

A scale-out prediction (``--world-size N``) is compared with one rank of the real run (issue 31): the ops
DistributedDataParallel and FSDP wrap the model in (``DistributedDataParallel.forward``,
``FullyShardedDataParallel.forward``) are looked through, so the model's own ops pair as on one GPU, and the GPU
work that data parallelism adds on either side (its hooks ``FSDP::*``, ``FullyShardedDataParallel._*``, the c10d and
NCCL ops; the prediction's synthesized events) is not paired but listed in ``added``, with its GPU time per step
(where both sides run it, two traces of a multi-rank run, it pairs as any op).

Traces of different programs are refused (fewer than ``MIN_MATCHED_OPS`` of the top-level ops pair up, or fewer
than ``MIN_SAME_SHAPES`` of the pairs run on the same input shapes);
a prediction for another GPU than the measured one gives a warning in the report's ``warnings``.

``validate_runs(predicted, measured)``: two runs (a trace is a run of one rank; a directory, one trace per rank),
their ranks paired by number, the tables of every pair with a ``rank`` column; the measured run is replayed as a
whole (its ranks jointly, pipeline.Run.baseline).
"""
from __future__ import annotations

from collections import defaultdict
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pandas as pd

from habitat_trace.errors import HabitatTraceError, SpecError
from habitat_trace.ingest import Tables
from habitat_trace.ingest import schema as S
from habitat_trace.pipeline import Run, measured_step_ns, overhead_removed, steady_iteration
from habitat_trace.pipeline.run import Rank, RankReplay, Replay
from habitat_trace.scale.specs import Catalog
from habitat_trace.timeline.steps import step_figures

# report figure -> step_figures column (ns); the report holds ms
STEP_FIGURES = {"gpu_busy": "gpu_busy_ns", "gpu_span": "gpu_span_ns", "cpu_step": "cpu_ns"}
# Share of the top-level op instances (name and occurrence in a step) that must pair up. The same workload
# pairs nearly all of them on another GPU; GPT-2 against ResNet-50 paired 12 (issue 19).
MIN_MATCHED_OPS = 0.5
# Share of the paired top-level ops (both with recorded shapes) whose input shapes must agree. The same workload
# on another GPU runs the same ops on the same shapes: 100% on each of the 34 shared same-workload pairs (H100 <->
# H200, each against its SM-limited run, 2026-11-25); GPT-2 against BERT pairs 808 ops by name (both are stacks
# of aten::linear, layer_norm, ...), 4 of 258 on the same shapes (issue 26, item 5).
MIN_SAME_SHAPES = 0.5
# The data-parallel wrappers' own ops: looked through (their children are the model's top-level ops) ...
DP_WRAPPERS = re.compile(r"^(DistributedDataParallel|FullyShardedDataParallel)\.forward$")
# ... and the work data parallelism adds, by the name of the top-level op it runs under (torch 2.11: DDP's reducer
# hooks run inside the backward's AccumulateGrad nodes, so only their collectives are named; FSDP1/FSDP2 hooks)
DP_ADDED = re.compile(r"^(FSDP::|FullyShardedDataParallel\.|RegisterPostBackwardFunction|nccl:|c10d::|"
                      r"record_param_comms|torch\.distributed|torch::distributed)")
SYNTHESIZED = "(synthesized)"  # the root of a prediction's synthesized events: launches with no op


@dataclass(frozen=True)
class Validation:
    """The tables ``validate`` prints: step figures (and the iteration), the matched ops and kernels, the worst."""

    steps: pd.DataFrame  # figure, predicted_ms, measured_ms, error_pct, measured_source, steps_compared
    matched: pd.DataFrame  # what (ops, kernels), matched, median / time-weighted |error|, total error
    worst_ops: pd.DataFrame
    worst_kernels: pd.DataFrame
    warnings: tuple[str, ...]
    added: pd.DataFrame = field(default_factory=pd.DataFrame)  # side, name, count/step, GPU ms/step (module doc)


def validate_runs(predicted: Run, measured: Run, top: int = 10, partial: bool = False) -> Validation:
    """Every pair of ranks (``pairs``; ``partial``: the ranks both hold) validated, rank after rank (module doc)."""
    baseline: list[Replay] = []

    def measured_rank(rank: Rank) -> Callable[[], RankReplay]:
        def replayed() -> RankReplay:  # the measured run's own replay, once, when a pair first needs it
            if not baseline:
                baseline.append(measured.baseline())
            return baseline[0].ranks[measured.ranks.index(rank)]
        return replayed

    parts = [(number, validate(p.tables, m.tables, predicted.options.catalog, measured_rank(m), top))
             for number, p, m in pairs(predicted, measured, partial)]
    frames = {name: pd.concat([getattr(v, name).assign(rank=n)[["rank", *getattr(v, name).columns]]
                               for n, v in parts], ignore_index=True)
              for name in ("steps", "matched", "worst_ops", "worst_kernels", "added")}
    return Validation(**frames, warnings=tuple(dict.fromkeys(w for _, v in parts for w in v.warnings)))


def pairs(predicted: Run, measured: Run, partial: bool = False) -> list[tuple[Optional[int], Rank, Rank]]:
    """(rank, predicted rank, measured rank): the only ones of two single traces, else paired by rank number (the
    ranks both hold when ``partial``: some traces could not be read)."""
    if predicted.single and measured.single:
        return [(None, predicted.ranks[0], measured.ranks[0])]
    p = {r.number: r for r in predicted.ranks}
    m = {r.number: r for r in measured.ranks}
    both = sorted(set(p) & set(m), key=str)
    if set(p) != set(m) and not (partial and both):
        raise HabitatTraceError(f"{predicted.source} and {measured.source} hold other ranks ({sorted(p, key=str)} "
                                f"and {sorted(m, key=str)}); give the predicted and the measured traces of the same "
                                "ranks")
    return [(k, p[k], m[k]) for k in both]


def validate(predicted: Tables, measured: Tables, catalog: Catalog, measured_baseline: Callable[[], RankReplay],
             top: int = 10) -> Validation:
    """One predicted trace against one measured; ``measured_baseline``: its rank of the measured run's own replay
    (replayed only once the traces are known to run the same program)."""
    warnings = gpu_mismatch(predicted, measured, catalog)
    fp = step_figures(predicted.steps, predicted.gpu).table
    raw = step_figures(measured.steps, measured.gpu).table
    n = min(len(fp), len(raw))
    pk, mk = _keyed(predicted, n), _keyed(measured, n)
    both = set(pk.loc[pk["added"], "root"]) & set(mk.loc[mk["added"], "root"])  # on both sides: pair them as usual
    pk["added"] &= ~pk["root"].isin(both)
    mk["added"] &= ~mk["root"].isin(both)
    added = _added(pk, mk, n)
    pk, mk = pk[~pk["added"]], mk[~mk["added"]]
    ops = _ops(pk, mk)
    _refuse_other_program(predicted, measured, ops, max(pk["key"].nunique(), mk["key"].nunique()))
    kernels = _kernels(pk, mk)
    fm, source = _measured_figures(predicted, measured, raw, measured_baseline, warnings)  # after the refusal
    rows = [{"figure": k, "predicted_ms": fp[c].iloc[:n].mean() / 1e6, "measured_ms": fm[c].iloc[:n].mean() / 1e6,
             "measured_source": source} for k, c in STEP_FIGURES.items()]
    p_it = steady_iteration(fp.iloc[:n], len(predicted.steps) > 0)[0]
    m_it, m_busy = steady_iteration(fm.iloc[:n], len(measured.steps) > 0)
    real = measured_step_ns(measured)
    it_source = source
    if real is not None and source == "estimated":
        m_it, it_source = max(real / 1e6, m_busy), "measured"
    rows.append({"figure": "iteration", "predicted_ms": p_it, "measured_ms": m_it, "measured_source": it_source})
    steps = pd.DataFrame([{**r, "error_pct": _err(r["predicted_ms"], r["measured_ms"]), "steps_compared": n}
                          for r in rows])
    matched = pd.DataFrame([{"what": w, **_summary(df)} for w, df in (("ops", ops), ("kernels", kernels))])
    return Validation(steps, matched, _worst(ops, top), _worst(kernels, top), tuple(warnings), added)


def _added(pk: pd.DataFrame, mk: pd.DataFrame, steps: int) -> pd.DataFrame:
    """The GPU work data parallelism adds on each side (module doc): per side and top-level op name, kernels and GPU
    ms per step."""
    rows = []
    for side, k in (("predicted", pk), ("measured", mk)):
        a = k[k["added"]].groupby("root", sort=False)[S.DUR].agg(["size", "sum"])
        rows += [{"side": side, "name": str(name), "count_per_step": float(r["size"]) / max(steps, 1),
                  "gpu_ms": float(r["sum"]) / max(steps, 1) / 1e6} for name, r in a.iterrows()]
    return pd.DataFrame(rows, columns=["side", "name", "count_per_step", "gpu_ms"])


def _measured_figures(predicted: Tables, measured: Tables, raw: pd.DataFrame,
                      measured_baseline: Callable[[], RankReplay], warnings: list[str]) -> tuple[pd.DataFrame, str]:
    """The measured trace's step figures (``raw``: as recorded) on the predicted trace's terms (module doc), and
    what they are."""
    if not overhead_removed(predicted) or overhead_removed(measured):
        return raw, "profiled" if not overhead_removed(measured) else "estimated"
    try:
        replayed = measured_baseline()
    except SpecError:
        warnings.append(f"{measured.path.name}: its GPU is not in the catalog, so its profiler overhead is not "
                        "removed: the CPU-side figures compare a de-profiled prediction with a profiled trace")
        return raw, "profiled"
    return replayed.step_figures().table, "estimated"


def _refuse_other_program(predicted: Tables, measured: Tables, ops: pd.DataFrame, total: int) -> None:
    """Different programs are refused: too few top-level ops pair up by name and order, or the pairs run on other
    shapes (module doc)."""
    why = ""
    if total and len(ops) < MIN_MATCHED_OPS * total:
        why = f"{len(ops)} of {total} top-level ops pair up by name and order"
    shaped = ops[(ops["predicted_dims"] != "") & (ops["measured_dims"] != "")]
    same = int((shaped["predicted_dims"] == shaped["measured_dims"]).sum())
    if not why and len(shaped) and same < MIN_SAME_SHAPES * len(shaped):
        why = f"of {len(shaped)} top-level ops paired by name and order, {same} have the same input shapes"
    if why:
        raise HabitatTraceError(f"{predicted.path.name} and {measured.path.name} run different programs: {why}; "
                                "validate a prediction against a trace of the same workload")


def gpu_mismatch(predicted: Tables, measured: Tables, catalog: Catalog) -> list[str]:
    """A warning when the predicted trace is for another GPU than the one the measured trace ran on
    (``catalog`` names; raw device names when the catalog knows neither)."""
    info = predicted.meta.get("habitat_trace")
    p_name = info.get("target") if isinstance(info, dict) else predicted.device_name
    spec_m = catalog.for_device(measured.device_name) if measured.device_name else None
    try:
        spec_p = catalog.resolve(str(p_name)) if p_name else None
    except SpecError:  # a --specs GPU (what-if) the default catalog does not hold
        spec_p = None
    a = spec_p.name if spec_p else p_name
    b = spec_m.name if spec_m else measured.device_name
    if a and b and a != b:
        return [f"{predicted.path.name} predicts {a} but {measured.path.name} ran on {b}: the errors compare "
                "different GPUs"]
    return []


def _err(p: float, m: float) -> float:
    return float(100 * (p / m - 1)) if m else float("nan")


def _keyed(trace: Tables, steps: int) -> pd.DataFrame:
    """GPU events of the first ``steps`` steps with their root op's occurrence key and kernel order; the root
    looks through the data-parallel wrappers, and ``added`` marks the work data parallelism adds (module doc)."""
    from habitat_trace.ingest.linking import root_ops

    g = trace.gpu[(trace.gpu[S.STEP] >= 0) & (trace.gpu[S.STEP] < steps)].copy()
    g = g.sort_values([S.STEP, S.LAUNCH_TS, S.TS], kind="stable")
    ops = trace.ops
    names = ops[S.NAME].to_numpy(dtype=object)
    wrapper = np.array([bool(DP_WRAPPERS.match(str(x))) for x in names], dtype=bool)
    stops = wrapper | np.isin(np.arange(len(ops)), trace.steps["op"].to_numpy() if "op" in trace.steps else [])
    stops |= ops[S.ROOT_OP].to_numpy() == np.arange(len(ops))  # the recorded roots stay roots
    roots = root_ops(ops[S.PARENT].to_numpy(), stops) if len(ops) else np.zeros(0, dtype=np.int64)
    op = g[S.OP].to_numpy()
    eff = np.where(op >= 0, roots[np.maximum(op, 0)] if len(ops) else S.NONE, S.NONE)
    eff = np.where(wrapper[np.maximum(eff, 0)] & (eff >= 0), op, eff) if len(ops) else eff
    g[S.ROOT_OP] = eff
    root = pd.Series(np.where(eff >= 0, names[np.maximum(eff, 0)] if len(ops) else "", "(no op)"), index=g.index)
    synthesized = (eff < 0) & (g[S.NAME].str.contains("synthesized by habitat-trace", regex=False)).to_numpy()
    root[synthesized] = SYNTHESIZED
    g["added"] = [bool(DP_ADDED.match(str(r))) or r == SYNTHESIZED for r in root]
    # occurrence of the root op instance within its step, by name: "aten::linear" #3 in step 0
    first = g.drop_duplicates([S.STEP, S.ROOT_OP])[[S.STEP, S.ROOT_OP]].copy()
    first["occ"] = first.assign(n=root.loc[first.index]).groupby([S.STEP, "n"]).cumcount()
    g = g.merge(first, on=[S.STEP, S.ROOT_OP], how="left")
    g["root"] = root.to_numpy()
    g["key"] = list(zip(g[S.STEP], g["root"], g["occ"]))
    g["method"] = [_arg(trace, e, "habitat_method") for e in g[S.EVENT]]
    dims = ops[S.INPUT_DIMS].to_numpy(dtype=object)
    g["dims"] = [repr(dims[r]) if r >= 0 and dims[r] else "" for r in g[S.ROOT_OP].tolist()]
    return g


def _arg(trace: Tables, event: int, key: str) -> str:
    args = trace.events[int(event)].get("args")
    return str(args.get(key, "")) if isinstance(args, dict) else ""


def _ops(p: pd.DataFrame, m: pd.DataFrame) -> pd.DataFrame:
    pa = p.groupby("key").agg(name=("root", "first"), predicted_ns=(S.DUR, "sum"),
                              method=("method", lambda x: x.mode().iat[0] if len(x) else ""),
                              predicted_dims=("dims", "first"))
    ma = m.groupby("key").agg(measured_ns=(S.DUR, "sum"), measured_dims=("dims", "first"))
    both = pa.join(ma, how="inner")
    return both.assign(error_pct=100 * (both.predicted_ns / both.measured_ns - 1)).reset_index(drop=True)


def _kernels(p: pd.DataFrame, m: pd.DataFrame) -> pd.DataFrame:
    mg = {k: list(zip(v["name"], v[S.DUR])) for k, v in m.groupby("key")}
    rows = []
    for key, grp in p.groupby("key"):
        cand = mg.get(key)
        if not cand:
            continue
        for (name, dur, method), (mname, mdur) in _pair(list(zip(grp["name"], grp[S.DUR], grp["method"])), cand):
            rows.append({"name": name, "measured_name": mname, "predicted_ns": dur, "measured_ns": mdur,
                         "method": method})
    k = pd.DataFrame(rows, columns=["name", "measured_name", "predicted_ns", "measured_ns", "method"])
    return k.assign(error_pct=100 * (k.predicted_ns / k.measured_ns.where(k.measured_ns > 0) - 1))


def _pair(pred: list[tuple], meas: list[tuple]) -> list[tuple[tuple, tuple]]:
    """Same-name kernels pair in order; the rest pair by position among the unmatched."""
    by_name: dict[str, list[int]] = defaultdict(list)
    for j, (name, _) in enumerate(meas):
        by_name[name].append(j)
    used, out, rest = set(), [], []
    for item in pred:
        js = by_name.get(item[0])
        if js:
            j = js.pop(0)
            used.add(j)
            out.append((item, meas[j]))
        else:
            rest.append(item)
    free = [meas[j] for j in range(len(meas)) if j not in used]
    out.extend(zip(rest, free))
    return out


def _summary(df: pd.DataFrame) -> dict[str, float]:
    e = df["error_pct"].replace([np.inf, -np.inf], np.nan).dropna()
    w = df["measured_ns"].where(df["error_pct"].notna(), 0)
    weighted = float((e.abs() * w.loc[e.index]).sum() / max(w.loc[e.index].sum(), 1)) if len(e) else float("nan")
    return {"matched": int(len(df)), "median_abs_error_pct": float(e.abs().median()) if len(e) else float("nan"),
            "time_weighted_abs_error_pct": weighted,
            "total_error_pct": float(100 * (df.predicted_ns.sum() / max(df.measured_ns.sum(), 1) - 1))}


def _worst(df: pd.DataFrame, top: int) -> pd.DataFrame:
    """Largest absolute time misses (ns), with their errors and the method that predicted them."""
    miss = (df.predicted_ns - df.measured_ns).abs()
    rows = df.assign(miss_ns=miss).sort_values("miss_ns", ascending=False, kind="stable").head(top)
    return rows.drop(columns=[c for c in ("predicted_dims", "measured_dims") if c in rows.columns])

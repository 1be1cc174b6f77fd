"""Lambda's published single-GPU training throughput vs `habitat-trace compare` from our H100 traces (issue 32).

    python benchmarks/crossarch/lambda_published.py --traces DIR [--shared ../shared] [--busy] [--no-write]
    python benchmarks/crossarch/lambda_published.py --closest [--trace MODEL,PREC,BATCH,PATH,MS ...]

Data: ../shared/data/lambda-published/published-dev.csv (README there): ResNet50 and BERT base/large SQuAD training
throughput (AMP = fp16 autocast, TF32 = the containers' FP32 default) per GPU of the dev split. The other GPUs of
Lambda's table are held out: this script never reads them, and nothing in the model was chosen by these rows (the
law's constants are physics or catalog medians), so leaving one GPU out changes nothing and is not repeated here.

Traces: ``--traces DIR`` is the output of benchmarks/collect/collect_lambda.py (DLE's attention) on an H100
(DIR/<model>_<prec>_b<batch>.pt.trace.json.gz and DIR/measured.jsonl with the un-profiled median step). Per
published row (GPU, model, precision, per-GPU batch b) the trace of the largest recorded batch <= b (else the
smallest) is scaled to the GPU, and compared per sample, drift-free (the two software stacks differ: 2022/2024
containers with DLE's own kernels against torch 2.x), as the README asks:
    error = (b_t / T_pred) / (b_h / M_h)  /  (thr_GPU / thr_H100) - 1,
with T_pred compare's iteration time of the target (``--busy``: its GPU busy time, and M_h the origin's), b_t the
trace's batch, M_h our measured H100 step at the H100 row's batch (same container generation's H100 rows, median),
thr the published throughputs. Positive: predicted too fast.

``--closest`` uses the nearest traces the repository's data hold today instead (no Lambda recording exists yet):
the shared H100 ResNet-50 bf16 channels-last b64 and BERT-base-like b32 s128 bf16 steps, AMP only, GPU busy time
(both are launch-bound at these batches). ``--trace`` adds more (e.g. a BERT-large step). These are other batches,
sequence lengths and dtypes than Lambda's: a smoke check of the direction of the errors, not the issue's figure.

Writes benchmarks/results/lambda_published.{md,csv} (``--closest``: lambda_published_closest.*).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from habitat_trace import compare  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402

CATALOG = load_catalog()

MODELS = ("resnet50", "bert_base_squad", "bert_large_squad")
PRECISION = {"AMP_FP16": "amp", "FP32": "tf32"}
RECORDED = {"fp32": "tf32"}  # collect_lambda.py's precision names -> the ones above
H100_ROW = "H100 80GB SXM5"
# Lambda's GPU names -> the catalog's; GH200 80GB (HBM3) has no catalog entry and is reported as skipped
GPUS = {"A100 80GB SXM4": "A100 SXM4 80GB", "RTX 3090": "RTX 3090", "RTX A6000": "RTX A6000",
        "V100 16GB": "V100 SXM2 16GB", "Quadro RTX 8000": "Quadro RTX 8000", "H200 140GB": "H200",
        "GH200 96GB": "GH200 96GB", "B200 192GB": "B200"}
BOUND = 0.10  # issue 32: mean |error| <= 10% on AMP and on TF32, no GPU biased by more than 10%


def published(shared: Path) -> pd.DataFrame:
    """One row per (container generation, GPU, precision, model): the median over Lambda's 1-GPU systems."""
    d = pd.read_csv(shared / "data" / "lambda-published" / "published-dev.csv")
    d = d[(d["n_gpus"] == 1) & d["model"].isin(MODELS)].copy()
    d["precision"] = d["precision"].str.split(" ").str[0].map(PRECISION)
    g = d.groupby(["dataset", "gpu", "precision", "model"], as_index=False).agg(
        batch=("batch_per_gpu", "median"), throughput=("throughput", "median"), systems=("throughput", "size"))
    h = g[g["gpu"] == H100_ROW].rename(columns={"batch": "h100_batch", "throughput": "h100_throughput"})
    m = g[g["gpu"] != H100_ROW].merge(h[["dataset", "precision", "model", "h100_batch", "h100_throughput"]],
                                     on=["dataset", "precision", "model"])
    return m.assign(catalog=m["gpu"].map(GPUS))


def recorded(traces: Path) -> pd.DataFrame:
    """collect_lambda.py's runs: model, precision, batch, trace path, measured median ms."""
    rows = [json.loads(x) for x in (traces / "measured.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "error" not in r]
    # collect_lambda.py names its TF32 runs (allow_tf32 on, as the containers' FP32 default) "fp32"
    return pd.DataFrame([{"model": r["model"], "precision": RECORDED.get(r["precision"], r["precision"]),
                          "batch": int(r["batch"]),
                          "trace": traces / f"{r['name']}.pt.trace.json.gz", "measured_ms": r["median_ms"]}
                         for r in rows])


def closest(shared: Path, extra: list[str]) -> pd.DataFrame:
    """The shared H100 traces nearest to Lambda's steps (module doc), with their measured steps."""
    gt = pd.read_csv(shared / "data" / "traces" / "ground_truth.csv")
    rows = []
    for model, name, batch in (("resnet50", "resnet50_b64_amp", 64), ("bert_base_squad", "bert_b32_s128_amp", 32)):
        ms = float(gt.loc[(gt["target"] == "h100-sxm") & (gt["workload"] == name), "median_ms"].iat[0])
        rows.append({"model": model, "precision": "amp", "batch": batch,
                     "trace": shared / "data" / "traces" / "h100-sxm" / f"{name}.pt.trace.json.gz", "measured_ms": ms})
    for spec in extra:
        model, prec, batch, path, ms = spec.split(",")
        rows.append({"model": model, "precision": prec, "batch": int(batch), "trace": Path(path),
                     "measured_ms": float(ms)})
    return pd.DataFrame(rows)


def pick(runs: pd.DataFrame, model: str, prec: str, batch: float) -> pd.Series | None:
    """The recorded run of the largest batch <= ``batch`` (else the smallest) of ``model`` at ``prec``; None if none."""
    r = runs[(runs["model"] == model) & (runs["precision"] == prec)].sort_values("batch")
    if r.empty:
        return None
    below = r[r["batch"] <= batch]
    return (below if len(below) else r).iloc[-1 if len(below) else 0]


def predict(pub: pd.DataFrame, runs: pd.DataFrame, busy: bool) -> pd.DataFrame:
    """compare's time for every published row whose GPU is catalogued and whose model/precision was recorded."""
    col = "gpu_busy_ms" if busy else "iteration_ms"
    cache: dict[Path, pd.DataFrame] = {}
    targets = sorted(pub["catalog"].dropna().unique())
    out = []
    for r in pub.itertuples():
        run, ref = pick(runs, r.model, r.precision, r.batch), pick(runs, r.model, r.precision, r.h100_batch)
        if run is None or ref is None or not isinstance(r.catalog, str):
            continue
        for path in (run["trace"], ref["trace"]):
            if path not in cache:
                cache[path] = compare(path, to=targets).set_index("gpu")
        h100_ms = cache[ref["trace"]][col].iat[0] if busy else ref["measured_ms"]
        out.append({**r._asdict(), "trace_batch": run["batch"],
                    "predicted_ms": cache[run["trace"]].loc[CATALOG.resolve(r.catalog).name, col],
                    "h100_trace_batch": ref["batch"], "h100_ms": h100_ms})
    d = pd.DataFrame(out).drop(columns=["Index"])
    pred = (d["trace_batch"] / d["predicted_ms"]) / (d["h100_trace_batch"] / d["h100_ms"])
    d["error"] = pred / (d["throughput"] / d["h100_throughput"]) - 1
    return d


def table(d: pd.DataFrame, by: list[str]) -> str:
    out = [f"| {' | '.join(by)} | rows | mean abs error | bias | worst | <= {100 * BOUND:.0f}% |",
           "|" + "---|" * len(by) + "---:|---:|---:|---:|---|"]
    for key, g in d.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        mae = g["error"].abs().mean()
        ok = mae <= BOUND and abs(g["error"].mean()) <= BOUND
        out.append(f"| {' | '.join(map(str, key))} | {len(g)} | {100 * mae:.1f}% | {100 * g['error'].mean():+.1f}% | "
                   f"{100 * g['error'].abs().max():.1f}% | {'yes' if ok else 'no'} |")
    return "\n".join(out) + "\n"


def rows_table(d: pd.DataFrame) -> str:
    out = ["| GPU | precision | model | batch (trace) | published / H100 | predicted / H100 | error |",
           "|---|---|---|---:|---:|---:|---:|"]
    for r in d.itertuples():
        pub = r.throughput / r.h100_throughput
        out.append(f"| {r.gpu} | {r.precision} | {r.model} | {r.batch:g} ({r.trace_batch}) | {pub:.3f} | "
                   f"{pub * (1 + r.error):.3f} | {100 * r.error:+.1f}% |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--traces", type=Path, help="collect_lambda.py's output folder (H100)")
    ap.add_argument("--closest", action="store_true", help="the nearest traces the repository's data hold (doc)")
    ap.add_argument("--trace", action="append", default=[], help="MODEL,PREC,BATCH,PATH,MEASURED_MS (--closest)")
    ap.add_argument("--busy", action="store_true", help="compare GPU busy time instead of the iteration")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    if not a.closest and a.traces is None:
        sys.exit(f"error: {Path(__file__).name}: no traces; give --traces DIR (collect_lambda.py's output) or --closest")
    runs = closest(a.shared, a.trace) if a.closest else recorded(a.traces)
    pub = published(a.shared)
    d = predict(pub, runs, busy=a.busy or a.closest)
    skipped = sorted(set(pub.loc[pub["catalog"].isna(), "gpu"]))
    title = "closest traces" if a.closest else f"traces {a.traces}"
    text = "\n".join([
        f"# Lambda's published training throughput vs `habitat-trace compare` ({title})\n",
        "Generated by benchmarks/crossarch/lambda_published.py; error = predicted / published throughput ratio to the "
        "H100, drift-free, - 1 (positive: predicted too fast). Dev split only. Traces: "
        + ", ".join(f"{r.model} {r.precision} b{r.batch} ({Path(r.trace).name})" for r in runs.itertuples()) + ".\n",
        "## Per precision\n", table(d, ["precision"]), "## Per GPU and precision\n", table(d, ["gpu", "precision"]),
        "## Per row\n", rows_table(d),
        f"Not scored: {', '.join(skipped) or 'none'} (no catalog entry).\n"])
    print(text)
    if not a.no_write:
        stem = "lambda_published_closest" if a.closest else "lambda_published"
        (a.out / f"{stem}.md").write_text(text)
        d.to_csv(a.out / f"{stem}.csv", index=False, float_format="%.4f")


if __name__ == "__main__":
    main()

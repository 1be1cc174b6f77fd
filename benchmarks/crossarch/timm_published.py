"""Mixed precision across GPU generations (issue 25): `habitat-trace compare` from our H100 and H200 traces of timm's
dev models against timm's own published inference tables (RTX 4090, 5090, 3090; RTX PRO 6000 Blackwell Max-Q).

    python benchmarks/crossarch/timm_published.py [--shared ../shared] [--h200 DIR] [--h200-b2048 DIR]
        [--h100-b2048 DIR] [--sweep]

Data (../shared/data/timm-published, README there): timm's benchmark.py figures (AMP fp16, NCHW, inference, batch 1024
or 768; the Max-Q table at batch 2048), dev models only; our H100 traces of them at the 4090 table's batch and image
size. `--h200` (batch 1024) and `--h200-b2048` are our H200 recordings, `--h100-b2048` our H100 one at batch 2048
(benchmarks/collect/collect_timm.py; not kept in the repository, ~6 and ~11 minutes to record on an H200). A prediction is compare's iteration time for the target
(`iteration_ms`, what the CLI prints), its error is against the published `infer_step_time` of the same model, image
size and batch. Beside it, two baselines: "no change" (the origin's own step, as if the GPUs were equal) and "wave law"
(this tool before issue 25: the wave law with per-SM datasheet peaks across chips).

Writes benchmarks/results/timm_published.{md,csv}: per origin and GPU, and per model family, the mean |error| and the
mean error (bias); then the origin invariance (the H200-origin prediction over the H100-origin one, same model and
GPU). `--sweep` adds the choice of crossarch.P with one GPU / one family left out (chosen on the rest, scored on the
one left out). Only the dev rows are read: every other timm model and GPU is held out (README).

The tables of torch 2.9.1 (RTX 4090, 5090, PRO 6000 Max-Q) were measured on re-parameterized models (benchmark.py
--reparam: MobileOne, FastViT, RepGhost branches fused, BN folded), the RTX 3090's (torch 2.4) were not: our H100
trace of mobileone_s1 predicts the 3090 within 3% and the 4090 +110% as recorded, -21% re-parameterized (--reparam
DIR: both recordings of such models, benchmarks/collect/collect_timm.py --reparam). Those rows measure another
program than our plain traces, so the tables show the GPUs' figures with and without them (REPARAMETERIZED).
"""
from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from habitat_trace import compare  # noqa: E402
from habitat_trace.scale import crossarch  # noqa: E402

TABLES = {"RTX 4090": "4090", "RTX 5090": "5090", "RTX 3090": "rtx3090", "RTX PRO 6000 Blackwell Max-Q": "pro6000maxq"}
B1024_TARGETS = ("RTX 4090", "RTX 5090", "RTX 3090")
# Dev models whose timm modules have fuse()/reparameterize() (timm.utils.model.reparameterize_model changes them), and
# the tables recorded with --reparam (torch 2.9.1); see the module doc
REPARAMETERIZED = ("mobileone_s1", "fastvit_t8", "repghostnet_100", "efficientvit_m5", "levit_128")
REPARAM_TABLES = ("RTX 4090", "RTX 5090", "RTX PRO 6000 Blackwell Max-Q")
B2048_TARGETS = ("RTX PRO 6000 Blackwell Max-Q",)
# Model families (timm's own groupings by architecture), for the leave-one-family-out check and the per-family table
FAMILIES = {
    "resnet-like": ("resnet", "seresnet", "res2net", "tresnet", "dla", "dpn", "gernet", "regnet", "hrnet", "vovnet",
                    "densenet", "inception", "vgg", "repghost", "ghostnet", "mobileone", "hgnet"),
    "mobile/efficient": ("mobilenet", "mnasnet", "lcnet", "efficientnet", "tinynet", "semnasnet", "rexnet", "fastvit",
                         "efficientformer", "efficientvit", "edgenext", "mobilevit", "starnet", "mambaout"),
    "convnext/metaformer": ("convnext", "poolformer", "convmixer", "focalnet"),
    "vit/attention": ("deit", "vit_", "flexivit", "pit_", "crossvit", "twins", "cait", "levit", "volo", "eva02", "coat",
                      "nest", "swin", "davit", "maxvit", "visformer"),
    "mlp": ("resmlp", "gmlp", "sequencer"),
}


def family(model: str) -> str:
    for fam, stems in FAMILIES.items():
        if any(model.startswith(s) or s in model for s in stems):
            return fam
    return "other"


def published(folder: Path) -> pd.DataFrame:
    rows = []
    for gpu, tag in TABLES.items():
        (path,) = sorted((folder / "published").glob(f"benchmark-infer-amp-nchw-*-{tag}.dev.csv"))
        d = pd.read_csv(path)[["model", "infer_img_size", "infer_batch_size", "infer_step_time"]]
        rows.append(d.assign(gpu=gpu))
    return pd.concat(rows, ignore_index=True).rename(columns={"infer_img_size": "img", "infer_batch_size": "batch"})


@contextmanager
def wave_law_across_chips() -> Iterator[None]:
    """This tool before issue 25: no cross-chip law (the wave law with per-SM datasheet peaks everywhere)."""
    saved = crossarch.applies
    crossarch.applies = lambda origin, target: False  # type: ignore[assignment]
    try:
        yield
    finally:
        crossarch.applies = saved  # type: ignore[assignment]


def predict_set(name: str, folder: Path, targets: tuple[str, ...], baseline: bool) -> pd.DataFrame:
    """compare's iteration time per (model, target GPU) for every trace of a recorded set (measured.csv beside)."""
    measured = pd.read_csv(folder / "measured.csv")
    rows = []
    for r in measured.itertuples():
        trace = folder / r.trace  # a path: compare opens its own run (a loaded Tables is not a Trace)
        table = compare(trace, to=list(targets))
        old = None
        if baseline:
            with wave_law_across_chips():
                old = compare(trace, to=list(targets)).set_index("gpu")["iteration_ms"]
        for row in table.iloc[1:].itertuples():
            rows.append({"origin": name, "model": r.model, "img": r.img, "batch": r.batch, "gpu": row.gpu,
                         "predicted_ms": row.iteration_ms, "origin_measured_ms": r.mean_ms,
                         "origin_predicted_ms": table["iteration_ms"].iat[0],
                         "wave_law_ms": np.nan if old is None else old[row.gpu]})
    return pd.DataFrame(rows)


def score(pred: pd.DataFrame, pub: pd.DataFrame) -> pd.DataFrame:
    m = pred.merge(pub, on=["model", "img", "batch", "gpu"])
    m["family"] = m["model"].map(family)
    m["error"] = m["predicted_ms"] / m["infer_step_time"] - 1
    m["no_change_error"] = m["origin_measured_ms"] / m["infer_step_time"] - 1
    m["wave_law_error"] = m["wave_law_ms"] / m["infer_step_time"] - 1
    m["other_program"] = m["model"].isin(REPARAMETERIZED) & m["gpu"].isin(REPARAM_TABLES)
    return m


def _pct(x: pd.Series) -> str:
    return "-" if x.isna().all() else f"{100 * x.abs().mean():.1f}%"


def table(m: pd.DataFrame, by: list[str]) -> str:
    out = [f"| {' | '.join(by)} | models | mean abs error | bias | worst | no change | wave law (before) |",
           "|" + "---|" * len(by) + "---:|---:|---:|---:|---:|---:|"]
    for key, d in m.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        out.append(f"| {' | '.join(map(str, key))} | {len(d)} | {_pct(d['error'])} | {100 * d['error'].mean():+.1f}% | "
                   f"{100 * d['error'].abs().max():.1f}% | {_pct(d['no_change_error'])} | {_pct(d['wave_law_error'])} |")
    return "\n".join(out) + "\n"


def reparam_evidence(folder: Path, pub: pd.DataFrame) -> str:
    """Our H100 recordings of the same models plain and re-parameterized (collect_timm.py [--reparam]) against each
    table: which table measured which program."""
    rows = []
    for kind in ("plain", "reparam"):
        if (folder / kind / "measured.csv").is_file():
            m = score(predict_set(f"H100 {kind}", folder / kind, B1024_TARGETS, False), pub)
            rows.append(m[m["model"].isin(REPARAMETERIZED)].assign(kind=kind))
    if not rows:
        return ""
    d = pd.concat(rows).pivot_table(index=["model", "kind"], columns="gpu", values="error")
    out = ["| model | our H100 trace | " + " | ".join(d.columns) + " |", "|---|---|" + "---:|" * len(d.columns)]
    for (model, kind), r in d.iterrows():
        out.append(f"| {model} | {kind} | " + " | ".join(f"{100 * v:+.0f}%" for v in r) + " |")
    return "\n".join(out) + "\n"


def invariance(pred: pd.DataFrame) -> str:
    """H200-origin over H100-origin prediction, same model and GPU: the model must not depend on the recording GPU."""
    a = pred[pred["origin"] == "H100"].set_index(["model", "gpu"])["predicted_ms"]
    b = pred[pred["origin"] == "H200"].set_index(["model", "gpu"])["predicted_ms"]
    r = (b / a).dropna() - 1
    if r.empty:
        return ""
    out = ["| GPU | pairs | mean abs difference | worst | within 5% |", "|---|---:|---:|---:|---:|"]
    for gpu, d in r.groupby(level="gpu", sort=False):
        out.append(f"| {gpu} | {len(d)} | {100 * d.abs().mean():.2f}% | {100 * d.abs().max():.1f}% | "
                   f"{100 * (d.abs() <= 0.05).mean():.0f}% |")
    worst = r.abs().sort_values().tail(3)
    out.append("\nWorst pairs: " + ", ".join(f"{m} on {g} {100 * v:+.1f}%" for (m, g), v in r[worst.index].items()))
    return "\n".join(out) + "\n"


def sweep(runs: dict[str, Path], pub: pd.DataFrame, values: tuple[float, ...] = (2.0, 3.0, 4.0, 6.0, 10.0)) -> str:
    """Choose P on all but one GPU (family) and score the one left out: P should not hinge on any one of them."""
    saved, scored = crossarch.P, {}
    try:
        for p in values:
            crossarch.P = p
            parts = [predict_set(n, f, B2048_TARGETS if "2048" in n else B1024_TARGETS, False) for n, f in runs.items()]
            m = score(pd.concat(parts), pub)
            scored[p] = m[~m["other_program"]]
    finally:
        crossarch.P = saved
    out = ["| left out | P chosen on the rest | its error there | its error at P = "
           f"{saved:g} |", "|---|---:|---:|---:|"]
    for col in ("gpu", "family"):
        for left in scored[values[0]][col].unique():
            rest = {p: m.loc[m[col] != left, "error"].abs().mean() for p, m in scored.items()}
            best = min(rest, key=rest.get)
            here = scored[best].loc[scored[best][col] == left, "error"].abs().mean()
            now = scored[saved].loc[scored[saved][col] == left, "error"].abs().mean() if saved in scored else np.nan
            out.append(f"| {col} {left} | {best:g} | {100 * here:.1f}% | {100 * now:.1f}% |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--h200", type=Path, default=None, help="our H200 traces at batch 1024 (collect_timm.py)")
    ap.add_argument("--h200-b2048", type=Path, default=None, help="our H200 traces at batch 2048 (the Max-Q table)")
    ap.add_argument("--h100-b2048", type=Path, default=None, help="our H100 traces at batch 2048 (the Max-Q table)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--sweep", action="store_true", help="leave-one-GPU/family-out choice of crossarch.P")
    ap.add_argument("--reparam", type=Path, default=None,
                    help="folder with plain/ and reparam/ H100 recordings of the re-parameterizable dev models")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    folder = a.shared / "data" / "timm-published"
    pub = published(folder)
    runs = {"H100": folder / "h100"}
    if a.h200 is not None:
        runs["H200"] = a.h200
    if a.h200_b2048 is not None:
        runs["H200 (batch 2048)"] = a.h200_b2048
    if a.h100_b2048 is not None:
        runs["H100 (batch 2048)"] = a.h100_b2048
    pred = pd.concat([predict_set(n, f, B2048_TARGETS if "2048" in n else B1024_TARGETS, True)
                      for n, f in runs.items()], ignore_index=True)
    m = score(pred, pub)
    md = ["# timm's published inference tables vs `habitat-trace compare` (issue 25)\n",
          f"Recorded sets: {', '.join(runs)}; {m['model'].nunique()} dev models; generated by "
          "benchmarks/crossarch/timm_published.py.\n",
          "## Per origin and GPU, without the rows that measured another program\n",
          f"The torch 2.9.1 tables ({', '.join(REPARAM_TABLES)}) were recorded on re-parameterized models; our traces "
          f"are of the plain ones, so {', '.join(REPARAMETERIZED)} are left out of those tables here (next table: all "
          "rows; evidence at the end).\n", table(m[~m["other_program"]], ["origin", "gpu"]),
          "## Per origin and GPU, every dev row\n", table(m, ["origin", "gpu"]),
          "## Per model family (all origins and GPUs, without the other-program rows)\n",
          table(m[~m["other_program"]], ["family"])]
    inv = invariance(pred)
    if inv:
        md += ["## Origin invariance (the same model and GPU from an H200 trace over an H100 trace)\n", inv]
    if a.sweep:
        md += ["## Choosing P with one GPU or one family left out\n", sweep(runs, pub)]
    if a.reparam is not None:
        md += ["## Which program each table measured: plain and re-parameterized H100 recordings\n",
               reparam_evidence(a.reparam, pub)]
    text = "\n".join(md)
    print(text)
    print(f"({time.time() - t0:.0f} s)")
    if not a.no_write:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "timm_published.md").write_text(text)
        m.to_csv(a.out / "timm_published.csv", index=False, float_format="%.4f")


if __name__ == "__main__":
    main()

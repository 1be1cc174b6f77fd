"""Across GPU generations: scale our H100 (and H200) traces of NeuSight's 18 end-to-end workloads to other GPUs and
compare the per-step GPU busy time with NeuSight's published latency (issues 17 and 25).

    python benchmarks/neusight_e2e.py [--shared ../shared] [--h200 DIR] [--out benchmarks/results] [--heldout]

Drift-free error (shared/data/neusight-e2e/README.md): the prediction is scaled by label_H100 / our measured H100
(`h100_measured.jsonl`, NeuSight's method on our host), which removes the software-version difference between
their recording and ours:  error = busy_pred · label_H100 / ours_H100 / label_target − 1. The H200 traces
(benchmarks/collect/collect_neusight.py, same software as our H100 ones) take the same correction: it is a property
of the software, not of the GPU that recorded the trace.
Dev GPUs (labels_dev.csv): V100 PCIe 32GB, T4, P100 PCIe 16GB, P4 (MI100 is AMD: benchmarks/neusight_amd.py). Beside
each cell, NeuSight's own published error (neusight_published_error_dev.csv).

``--heldout`` prints the predictions (ms, drift-corrected to NeuSight's H100 software) for the A100 80GB PCIe,
A100 PCIe 40GB and L4 from each origin, and how far the two origins' predictions are apart, and writes
neusight_e2e_heldout.csv. Their labels are a held-out re-measurement: this script never reads them, and nothing in
the model was fitted or chosen by them.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from habitat_trace.timeline.steps import replayed_step_figures, step_figures  # noqa: E402
from habitat_trace.ingest import load  # noqa: E402
from habitat_trace.scale.engine import predict  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402
from habitat_trace.timeline.replay import replay  # noqa: E402

H100_LABEL = "NVIDIA_H100_80GB_HBM3"
# NeuSight's label folder name -> our catalog name
DEV_GPUS = {"Tesla_V100-PCIE-32GB": "V100 PCIe 32GB", "Tesla_T4": "T4", "Tesla_P100-PCIE-16GB": "P100 PCIe 16GB",
            "Tesla_P4": "P4"}
HELDOUT_GPUS = {"NVIDIA_A100_80GB_PCIe": "A100 PCIe 80GB", "NVIDIA_A100-PCIE-40GB": "A100 PCIe 40GB",
                "NVIDIA_L4": "L4"}
# workload names of the published-error table
MODEL_NAMES = {"bert_large": "BERT-Large", "gpt2_large": "GPT2-Large", "gpt3_xl": "GPT3-XL", "gpt3_27": "GPT3-2.7B",
               "opt_13": "OPT-1.3B"}


def e2e_folder(shared: Path) -> Path:
    return shared / "data" / "neusight-e2e"


def read_labels(folder: Path) -> dict[tuple[str, str], float]:
    """(gpu, workload) -> e2e ms, dev GPUs only (the only labels the folder holds)."""
    with (folder / "labels_dev.csv").open() as f:
        return {(r["gpu"], r["workload"]): float(r["e2e_ms"]) for r in csv.DictReader(f)}


def read_ours(folder: Path) -> dict[str, float]:
    """workload -> our H100 e2e ms with NeuSight's method."""
    with (folder / "h100_measured.jsonl").open() as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {r["workload"]: float(r["e2e_ms"]) for r in rows}


def read_published(folder: Path) -> dict[tuple[str, str], float]:
    """(gpu, workload) -> NeuSight's published |error| % (method NeuSight)."""
    out = {}
    names = {v: k for k, v in MODEL_NAMES.items()}
    with (folder / "neusight_published_error_dev.csv").open() as f:
        for r in csv.DictReader(f):
            if r["method"] != "NeuSight" or r["model"] not in names:
                continue
            out[(r["gpu"], f"{names[r['model']]}-{r['mode']}-{r['batch']}")] = float(r["error_pct"])
    return out


def published_for(published: dict, gpu: str, workload: str) -> float | None:
    """The published table names a cell by model, mode and batch (sequence length is the model's)."""
    model, mode, _seq, batch = workload.split("-")
    return published.get((gpu, f"{model}-{mode}-{batch}"))


def busy_ms(trace, target) -> tuple[float, float]:
    """(origin, predicted) mean per-step GPU busy time in ms."""
    origin = load_catalog().for_device(trace.device_name)
    base = step_figures(trace.steps, trace.gpu).table.gpu_busy_ns.mean() / 1e6
    pred = predict(trace, origin, target)
    got = replayed_step_figures(trace, replay(trace, pred)).table.gpu_busy_ns.mean() / 1e6  # GPU only: no host clock
    return base, got


def origins(shared: Path, h200: Path | None) -> list[tuple[str, Path]]:
    """(origin GPU, folder of its 18 traces): our H100 set in ../shared, and the H200 set where it was recorded."""
    out = [("H100", e2e_folder(shared))]
    if h200 is not None and any(h200.glob("*.pt.trace.json.gz")):
        out.append(("H200", h200))
    return out


def run(shared: Path, heldout: bool = False, only: tuple[str, ...] = (), h200: Path | None = None
        ) -> tuple[list[dict], list[dict]]:
    folder = e2e_folder(shared)
    labels, ours, published = read_labels(folder), read_ours(folder), read_published(folder)
    catalog = load_catalog()
    rows, held = [], []
    for origin, traces in origins(shared, h200):
        for path in sorted(traces.glob("*.pt.trace.json.gz")):
            workload = path.name.removesuffix(".pt.trace.json.gz")
            if only and workload not in only:
                continue
            trace = load(path)
            drift = labels[(H100_LABEL, workload)] / ours[workload]
            for label_gpu, name in DEV_GPUS.items():
                if (label_gpu, workload) not in labels:
                    continue
                base, got = busy_ms(trace, catalog.resolve(name))
                want = labels[(label_gpu, workload)]
                rows.append({"origin": origin, "gpu": name, "workload": workload, "label_ms": want,
                             "predicted_ms": got * drift, "origin_busy_ms": base,
                             "error_pct": 100 * (got * drift / want - 1),
                             "neusight_error_pct": published_for(published, label_gpu, workload)})
            if heldout:
                for name in HELDOUT_GPUS.values():
                    base, got = busy_ms(trace, catalog.resolve(name))
                    held.append({"origin": origin, "gpu": name, "workload": workload, "predicted_ms": got * drift,
                                 "predicted_busy_ms": got, "origin_busy_ms": base})
    return rows, held


def summary(rows: list[dict]) -> str:
    out = ["| origin | GPU | cells | mean abs error | bias | worst | NeuSight published (same cells) |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for origin in dict.fromkeys(r["origin"] for r in rows):
        for gpu in [*DEV_GPUS.values(), "all"]:
            sel = [r for r in rows if r["origin"] == origin and gpu in ("all", r["gpu"])]
            if not sel:
                continue
            e = [r["error_pct"] for r in sel]
            ns = [r["neusight_error_pct"] for r in sel if r["neusight_error_pct"] is not None]
            ns_txt = f"{sum(ns) / len(ns):.1f}% ({len(ns)} cells)" if ns else "n/a"
            out.append(f"| {origin} | {gpu} | {len(sel)} | {sum(map(abs, e)) / len(e):.1f}% | "
                       f"{sum(e) / len(e):+.1f}% | {max(map(abs, e)):.1f}% | {ns_txt} |")
    return "\n".join(out) + "\n"


def markdown(rows: list[dict]) -> str:
    out = [summary(rows), "| origin | GPU | workload | label ms | predicted ms (drift-free) | error | NeuSight error |",
           "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        ns = "" if r["neusight_error_pct"] is None else f"{r['neusight_error_pct']:.1f}%"
        out.append(f"| {r['origin']} | {r['gpu']} | {r['workload']} | {r['label_ms']:.1f} | {r['predicted_ms']:.1f} | "
                   f"{r['error_pct']:+.1f}% | {ns} |")
    return "\n".join(out) + "\n"


def origin_spread(held: list[dict]) -> str:
    """How far the H200-origin predictions of the held-out GPUs are from the H100-origin ones (no labels read)."""
    by = {(r["gpu"], r["workload"]): r["predicted_ms"] for r in held if r["origin"] == "H100"}
    d = [abs(r["predicted_ms"] / by[(r["gpu"], r["workload"])] - 1) for r in held
         if r["origin"] == "H200" and (r["gpu"], r["workload"]) in by]
    if not d:
        return ""
    return (f"\nOrigin invariance on the held-out GPUs (predictions only): H200-origin vs H100-origin predictions "
            f"differ by {100 * sum(d) / len(d):.2f}% on average, {100 * max(d):.2f}% at most ({len(d)} cells).\n")


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--h200", type=Path, default=None,
                    help="folder of H200 traces of the same workloads (benchmarks/collect/collect_neusight.py)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--heldout", action="store_true", help="also predict the held-out GPUs (labels never read)")
    ap.add_argument("--only", nargs="*", default=(), help="workloads to run (default: all 18)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    a = ap.parse_args()
    t0 = time.time()
    rows, held = run(a.shared, a.heldout, tuple(a.only), a.h200)
    md = markdown(rows)
    if held:
        md += ("\nHeld-out GPUs: predictions only (their labels are a re-measurement by others; never read here).\n\n"
               "| held-out GPU | workload | predicted ms (drift-corrected) | predicted busy ms (our software) |\n"
               "|---|---|---:|---:|\n")
        md += "".join(f"| {r['gpu']} | {r['workload']} | {r['predicted_ms']:.1f} | {r['predicted_busy_ms']:.1f} |\n"
                      for r in held if r["origin"] == "H100")
        md += origin_spread(held)
    print(md)
    print(f"({time.time() - t0:.0f} s)")
    if not a.no_write and not a.only:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "neusight_e2e.md").write_text(md)
        write_csv(a.out / "neusight_e2e.csv", rows)
        if held:
            write_csv(a.out / "neusight_e2e_heldout.csv", held)


if __name__ == "__main__":
    main()

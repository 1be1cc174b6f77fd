"""Per-op check of scale/crossarch's FP32 GEMM law against NeuSight's published per-op labels (dev GPUs only).

    python benchmarks/crossarch/perop_gemm.py [--shared ../shared]

For every Linear / Conv1D module and attention matmul of shared/data/neusight-e2e/perop/<GPU>/<workload>.csv.gz
(one transformer layer plus embeddings and head; forward, and backward as the two GEMMs dgrad + wgrad of a linear
layer), the time-weighted |error| of the cross-chip law (crossarch.predict_ns with the engine's roofline floor, as
gemm_kernels.law_ns) from NeuSight's own H100 per-op label of the node (split over its GEMMs by FLOPs): the law
from an H100 with the same software on both sides. A check, not a fit: nothing here feeds the catalog.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from habitat_trace.scale import learned  # noqa: E402
from habitat_trace.scale.learned import model as M  # noqa: E402
from habitat_trace.scale.rates import rates  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_kernels import hosts, law_ns  # noqa: E402
from training import data as D  # noqa: E402  (on the path gemm_kernels sets)

DEV = {"Tesla_V100-PCIE-32GB": "V100 PCIe 32GB", "Tesla_T4": "T4", "Tesla_P100-PCIE-16GB": "P100 PCIe 16GB",
       "Tesla_P4": "P4"}
H100 = ("NVIDIA_H100_80GB_HBM3", "H100 SXM5 80GB")
NOT_GEMM = ("embed", "norm", "dropout", "act", "wpe", "wte")


def learned_ns(q: pd.DataFrame, origin, target, sweep: dict | None) -> np.ndarray:
    """The learned model's target time (ns) of each GEMM row of ``q``, as `scale` calls it, or with each GPU moved
    from its sweep host (``sweep``: gemm_kernels.hosts of the model's training sets) to the catalog's card (module
    doc); NaN outside the model's domain."""
    h_o, h_t = (rates(sweep[g.name]).simt_tflops / rates(g).simt_tflops if sweep else 1.0 for g in (origin, target))
    t = q.t_origin_ms.to_numpy() * 1e6 / h_o
    ratio = learned.gemm_time_ratios(q.m.to_numpy(), q.n.to_numpy(), q.k.to_numpy(), q.b.to_numpy(), "fp32", origin,
                                     target, t) * h_t
    flops, nbytes = M.gemm_cost(q.b.to_numpy(), q.m.to_numpy(), q.n.to_numpy(), q.k.to_numpy())
    return np.maximum(t * ratio, M.roofline_ms(flops, nbytes, M.gpu_vector(target)) * 1e6)


def gemms(d: pd.DataFrame) -> list[tuple[str, str, list[tuple[int, int, int, int]], float]]:
    """(node, pass, [(B, M, N, K) per GEMM], ms) for the GEMM nodes of one per-op label file."""
    out = []
    for _, r in d.iterrows():
        name, shapes = str(r["Name"]), ast.literal_eval(r["input_shapes"])
        out_shape = ast.literal_eval(r["output_shape"]) if isinstance(r["output_shape"], str) else ()
        if r["op"] == "call_module" and len(shapes) == 1 and len(shapes[0]) >= 2 and len(out_shape) == len(shapes[0]) \
                and not any(t in name for t in NOT_GEMM) and str(r["dtype"]) == "torch.float32":
            m, k, n = int(np.prod(shapes[0][:-1])), shapes[0][-1], out_shape[-1]
            out.append((name, "fw", [(1, m, n, k)], float(r["fw_latency"])))
            if r["bw_latency"] > 0:
                out.append((name, "bw", [(1, m, k, n), (1, k, n, m)], float(r["bw_latency"])))
        elif name.startswith("matmul") and len(shapes) == 2 and len(shapes[0]) == 4:
            a, b = shapes
            bat = a[0] * a[1]
            out.append((name, "fw", [(bat, a[2], b[3], a[3])], float(r["fw_latency"])))
            if r["bw_latency"] > 0:
                out.append((name, "bw", [(bat, a[2], a[3], b[3]), (bat, a[3], b[3], a[2])], float(r["bw_latency"])))
    return out


def node_rows(folder: Path, dev: str, origin: str = H100[0]) -> pd.DataFrame:
    """One row per GEMM of each labelled node on ``dev``, with the ``origin`` GPU's label of the node (NeuSight's
    H100 by default) split over its GEMMs by FLOPs as the origin time."""
    rows = []
    for path in sorted((folder / dev).glob("*.csv.gz")):
        if not (folder / origin / path.name).is_file():
            continue
        ref = {(n, p): ms for n, p, _, ms in gemms(pd.read_csv(folder / origin / path.name))}
        for node, pas, parts, ms in gemms(pd.read_csv(path)):
            if ms <= 0 or (node, pas) not in ref:
                continue
            flops = np.array([2.0 * b * m * n * k for b, m, n, k in parts])
            for (b, m, n, k), f in zip(parts, flops):
                rows.append({"node": (path.name, node, pas), "b": b, "m": m, "n": n, "k": k, "label_ms": ms,
                             "t_origin_ms": ref[(node, pas)] * f / flops.sum()})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    a = ap.parse_args()
    catalog = load_catalog()
    folder = a.shared / "data" / "neusight-e2e" / "perop"
    h100 = catalog.resolve(H100[1])
    print("| GPU | GEMM nodes | label ms | law error (time-weighted) | law bias |")
    print("|---|---:|---:|---:|---:|")
    for dev, name in DEV.items():
        q = node_rows(folder, dev)
        q["pred_ms"] = law_ns(q, h100, catalog.resolve(name)) / 1e6
        g = q.groupby("node").agg(pred=("pred_ms", "sum"), label=("label_ms", "first"))
        err = (g["pred"] - g["label"]).abs().sum() / g["label"].sum()
        print(f"| {name} | {len(g)} | {g['label'].sum():.1f} | {100 * err:.1f}% | "
              f"{100 * (g['pred'].sum() / g['label'].sum() - 1):+.1f}% |")
    print("\n| origin | target | GEMM nodes | learned, as `scale` calls it: time-weighted, median signed | "
          "moved to the catalog's cards (tried, not kept) |\n|---|---|---:|---:|---:|")
    sweep = hosts(D.load_neusight(a.shared / "data" / "neusight"))
    for o_dev, o_name in DEV.items():
        for t_dev, t_name in DEV.items():
            q = node_rows(folder, t_dev, o_dev) if o_dev != t_dev else pd.DataFrame()
            if q.empty:
                continue
            o, t = catalog.resolve(o_name), catalog.resolve(t_name)
            cells = []
            for hosts_of in (None, sweep):
                g = q.assign(pred=learned_ns(q, o, t, hosts_of) / 1e6).groupby("node").agg(
                    pred=("pred", lambda v: v.sum(min_count=len(v))), label=("label_ms", "first")).dropna()
                err = (g["pred"] - g["label"]).abs().sum() / g["label"].sum()
                cells.append(f"{100 * err:.1f}%, {100 * (g['pred'] / g['label'] - 1).median():+.1f}%")
            print(f"| {o_name} | {t_name} | {len(g)} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()

"""DRAM efficiency per GPU (the `dram_efficiency` values of specs/gpus.toml for the NeuSight dev GPUs): the median
achieved bandwidth of large streaming ops over the datasheet bandwidth.

    python benchmarks/crossarch/fit_dram.py [--shared ../shared]

Data: NeuSight's published per-op labels of the dev GPUs (shared/data/neusight-e2e/perop/<GPU>/*.csv.gz; fair data
per issue 17). Streaming ops: elementwise FX nodes (add, sub, mul, truediv, gelu, softmax, contiguous, layer norm)
moving at least MIN_MB; bytes = inputs + output, FP32, each tensor once (they exceed every dev GPU's L2).
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

MIN_MB = 64.0  # 16x the largest dev L2 (T4: 4 MiB)
STREAMING = ("add", "sub", "mul", "truediv", "gelu", "softmax", "contiguous", "layer_norm")
DEV = {"Tesla_V100-PCIE-32GB": "V100 PCIe 32GB", "Tesla_T4": "T4", "Tesla_P100-PCIE-16GB": "P100 PCIe 16GB",
       "Tesla_P4": "P4"}


def numel(shape) -> int:
    return int(np.prod(shape)) if len(shape) else 1


def achieved_gbs(folder: Path) -> np.ndarray:
    out = []
    for path in sorted(folder.glob("*.csv.gz")):
        d = pd.read_csv(path)
        for _, r in d.iterrows():
            name = str(r["Name"])
            if not any(name == s or name.startswith(s + "_") or name.endswith(s) for s in STREAMING):
                continue
            if str(r["dtype"]) != "torch.float32" or not r["fw_latency"] > 0:
                continue
            shapes = [s for s in ast.literal_eval(r["input_shapes"]) if isinstance(s, list) and len(s) > 1]
            nbytes = 4.0 * (sum(numel(s) for s in shapes) + numel(ast.literal_eval(r["output_shape"])))
            if nbytes >= MIN_MB * 1e6:
                out.append(nbytes / (r["fw_latency"] * 1e-3) / 1e9)
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    a = ap.parse_args()
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog()
    for folder, name in DEV.items():
        gbs = achieved_gbs(a.shared / "data" / "neusight-e2e" / "perop" / folder)
        bw = catalog.resolve(name).memory_bandwidth_gbs
        print(f"{name}: {np.median(gbs) / bw:.2f} of {bw:.0f} GB/s (median {np.median(gbs):.0f} GB/s over {len(gbs)} "
              f"streaming ops, p10-p90 {np.percentile(gbs, 10):.0f}-{np.percentile(gbs, 90):.0f})")


if __name__ == "__main__":
    main()

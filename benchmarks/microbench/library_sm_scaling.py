"""How isolated library kernels (cuBLAS GEMMs, cuDNN convolutions, SDPA) slow down on fewer SMs of the same
chip, from the microbenchmarks in benchmarks/results/{gemm,convattn}/ (green contexts, H100 SXM and H200).

    python benchmarks/microbench/library_sm_scaling.py     # prints and writes benchmarks/results/library_sm_scaling.md

Per (kernel family, dtype, SM count): the median of t(SMs) / t(full) over shapes that ran the same kernel at
both SM counts and took >= 0.15 ms at full SMs (smaller ones are launch/latency-bound), beside the SM ratio a
purely SM-bound kernel would show, and whether the grid changed (cuBLAS sizes its persistent grids to the
device, not to the green context). Used in the README's learned-model section to explain why models trained
on isolated microbenchmarks over-predict the gain of fewer SMs seen inside training steps.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
MIN_MS = 0.15  # below this, launch latency and ramp-up dominate a kernel's time
GPUS = {"H100 SXM": "NVIDIA_H100_80GB_HBM3", "H200": "NVIDIA_H200"}
FULL_SMS = 132


def pairs(folder: str, prefix: str, gpu: str, keys: list[str]) -> list[tuple[int, pd.DataFrame]]:
    full = RESULTS / folder / f"{prefix}_{gpu}.csv.gz"
    if not full.exists():
        return []
    base = pd.read_csv(full)
    out = []
    for path in sorted((RESULTS / folder).glob(f"{prefix}_{gpu}_sm*.csv.gz")):
        sms = int(path.name.split("_sm")[1].split(".")[0])
        j = base.merge(pd.read_csv(path), on=keys, suffixes=("", "_s"))
        j = j[(j["Kernel Name"] == j["Kernel Name_s"]) & (j.Latency >= MIN_MS)]
        same_grid = (j[["Grid x", "Grid y", "Grid z"]].to_numpy() == j[["Grid x_s", "Grid y_s", "Grid z_s"]].to_numpy())
        out.append((sms, j.assign(ratio=j.Latency_s / j.Latency, same_grid=same_grid.all(axis=1))))
    return out


def family(row: pd.Series) -> str:
    name = str(row["Kernel Name"])
    if row["OPName"].startswith(("conv", "sdpa")):
        return row["OPName"]
    return "gemm nvjet (persistent)" if "nvjet" in name else "gemm other"


def table() -> pd.DataFrame:
    rows = []
    gemm_keys = ["OPName", "B", "M", "N", "K", "DType"]
    ca_keys = ["OPName", "N", "C", "H", "K", "R", "Stride", "Heads", "SeqQ", "HeadDim", "Causal", "DType",
               "ChannelsLast"]
    for label, gpu in GPUS.items():
        for folder, prefix, keys in (("gemm", "gemm", gemm_keys), ("convattn", "convattn", ca_keys)):
            for sms, j in pairs(folder, prefix, gpu, keys):
                j = j.assign(family=j.apply(family, axis=1))
                for (fam, dtype), q in j.groupby(["family", "DType"]):
                    rows.append({"gpu": label, "SMs": sms, "kernels": fam, "dtype": dtype, "shapes": len(q),
                                 "median t(SMs)/t(full)": q.ratio.median(), "SM ratio": FULL_SMS / sms,
                                 "same grid": f"{100 * q.same_grid.mean():.0f}%"})
    return pd.DataFrame(rows)


def markdown(t: pd.DataFrame) -> str:
    cells = [[f"{v:.2f}" if isinstance(v, float) else str(v) for v in r] for r in t.itertuples(index=False)]
    return "\n".join(["| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
                     + ["| " + " | ".join(r) + " |" for r in cells])


def main() -> None:
    t = table()
    t = t[t.shapes >= 10].sort_values(["gpu", "SMs", "kernels", "dtype"])
    text = markdown(t)
    print(text)
    (RESULTS / "library_sm_scaling.md").write_text(__doc__.split("\n\n")[0] + "\n\n" + text + "\n")


if __name__ == "__main__":
    main()

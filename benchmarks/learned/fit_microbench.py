"""Pack the host-free (queued) H100 SXM / H200 library-kernel microbenchmarks into the table the
``learned-microbench`` method reads (benchmarks/learned/training/microbench_gemm.npz), and cross-validate its
nearest-neighbour ratio within the microbenchmarks:

    python benchmarks/learned/fit_microbench.py [--check]

Input: benchmarks/results/queued/queued_gemm_<gpu>.csv.gz (benchmarks/collect/queued_retime.py: the shapes of
gemm_microbench.py re-timed with the stream held by a spin kernel, so no host time is in them). Output: per GPU,
one row per (dtype, B, M, N, K) with the median queued time; no fitting is stored, the model is the table
(``benchmarks/learned/training/microbench.py``). ``--check`` prints leave-one-out error of the ratio
t_H200 / t_H100 for each neighbour count, against "ratio = 1" (what both GPUs' equal peaks suggest).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from training import microbench as MB  # noqa: E402

QUEUED = ROOT / "benchmarks" / "results" / "queued"
DEVICES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
KEYS = ["DType", "B", "M", "N", "K"]


def load(device: str) -> pd.DataFrame:
    d = pd.read_csv(QUEUED / f"queued_gemm_{device.replace(' ', '_')}.csv.gz")
    # linear and bmm of the same (B, M, N, K) run the same cuBLAS kernel family: one row per shape
    return d.groupby(KEYS, as_index=False)["Q"].median()


def pack() -> dict[str, np.ndarray]:
    out = {}
    for i, dev in enumerate(DEVICES):
        d = load(dev)
        out[f"device_{i}"] = np.array(dev)
        out[f"dtype_{i}"] = d.DType.map({n: c for c, n in enumerate(MB.DTYPES)}).to_numpy(np.uint8)
        out[f"bmnk_{i}"] = d[["B", "M", "N", "K"]].to_numpy(np.int32)
        out[f"ms_{i}"] = d.Q.to_numpy(np.float32)
    return out


def check() -> None:
    a, b = load(DEVICES[0]), load(DEVICES[1])
    m = a.merge(b, on=KEYS, suffixes=("_o", "_t"))
    x = MB.features(*m[["B", "M", "N", "K"]].to_numpy(np.float64).T)
    y = np.log(m.Q_t / m.Q_o).to_numpy()
    w = m.Q_o.to_numpy()
    dt = m.DType.to_numpy()
    print(f"{len(m)} paired shapes; leave-one-out |t_H200/t_H100 error| (median, time-weighted):")
    for k in (1, 2, 4, 8, 16):
        pred = np.empty(len(m))
        for d in np.unique(dt):
            s = np.flatnonzero(dt == d)
            for i in s:
                tr = s[s != i]
                pred[i] = MB.knn_log_ratio(x[tr], y[tr], x[i:i + 1], k)[0]
        err = np.abs(np.exp(pred - y) - 1)
        print(f"  k={k:2d}: {100 * np.median(err):.2f}%  {100 * (err * w).sum() / w.sum():.2f}%")
    err = np.abs(np.exp(-y) - 1)
    print(f"  ratio 1: {100 * np.median(err):.2f}%  {100 * (err * w).sum() / w.sum():.2f}%")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.check:
        check()
        return
    np.savez_compressed(MB.TABLE, **pack())
    print(f"wrote {MB.TABLE} ({MB.TABLE.stat().st_size} bytes)")


if __name__ == "__main__":
    main()

"""Do streaming kernels below their bandwidth gain a faster GPU's bandwidth? H100 -> H200 kernel pairs (issue 32).

    python benchmarks/crossarch/streaming_bandwidth.py [--shared ../shared] [--out benchmarks/results] [--no-write]

The H200 is the H100's chip (GH100, 132 SMs, the same clocks and 700 W limit) with 1.43x its achievable bandwidth
(4.3 against 3.0 TB/s, the catalog's measured copies). The same eight steps were recorded on both
(../shared/data/traces/h100-sxm and h200-sxm, torch 2.11); their kernels pair up by name and occurrence. For each
H100 kernel of >= 3 us whose op's bytes are known (the bytes the cross-chip law reads, scale/engine.cross_chip_work),
its DRAM utilization u = bytes / (time x 3.0 TB/s) bins it, and the median H100 / H200 time of each bin says how much of
the bandwidth it gained: 1.43 for a kernel the bandwidth bounds, 1.0 for one its SMs and clock bound. The cross-chip
law's P-norm overlap (scale/crossarch.py, P = 10) reads a kernel at u = 0.8 as mostly latency and moves it at SMs x
clock; a law that carried the kernel's fraction of its bandwidth over would move it at the bandwidth ratio. The table
says which the kernels do. Writes benchmarks/results/streaming_h100_h200.md.
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from habitat_trace.ingest import classify as K  # noqa: E402
from habitat_trace.ingest import load  # noqa: E402
from habitat_trace.ingest import schema as S  # noqa: E402
from habitat_trace.scale.engine import cross_chip_work  # noqa: E402
from habitat_trace.scale.facts import kernel_facts  # noqa: E402
from habitat_trace.scale.rates import rates  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402

WORKLOADS = ("bert_b32_s128_amp", "dcgan_b128_fp32", "gnmt_b64_fp32", "gpt2_b8_s1024_amp", "mlp_b32_fp32",
             "resnet50_b64_amp", "resnet50_b64_fp32", "vgg16_b32_fp32")
MIN_NS = 3_000  # shorter kernels time their launch as much as their work
BINS = [0, 0.1, 0.3, 0.5, 0.7, 0.85, 1.0, 1.2, np.inf]


def _occurrences(names: np.ndarray, kernel: np.ndarray) -> list[tuple[str, int] | None]:
    """(name, how many kernels of that name came before) per row; None for rows that are not kernels."""
    seen: collections.Counter[str] = collections.Counter()
    out: list[tuple[str, int] | None] = []
    for name, k in zip(names.tolist(), kernel.tolist()):
        out.append((name, seen[name]) if k else None)
        if k:
            seen[name] += 1
    return out


def pairs(shared: Path) -> pd.DataFrame:
    """One row per H100 kernel with known bytes and its H200 twin: workload, library, H100 and H200 ns, u."""
    catalog = load_catalog()
    h100, h200 = catalog.resolve("H100 SXM5 80GB"), catalog.resolve("H200")
    bandwidth = rates(h100).dram_gbs * 1e9
    rows = []
    for w in WORKLOADS:
        a = load(shared / "data" / "traces" / "h100-sxm" / f"{w}.pt.trace.json.gz")
        b = load(shared / "data" / "traces" / "h200-sxm" / f"{w}.pt.trace.json.gz")
        nbytes = cross_chip_work(a, kernel_facts(a, h100, h200)).nbytes
        ga, gb = a.gpu, b.gpu
        occ_a = _occurrences(ga[S.NAME].to_numpy(), ga[S.CAT].eq(S.CAT_KERNEL).to_numpy())
        occ_b = _occurrences(gb[S.NAME].to_numpy(), gb[S.CAT].eq(S.CAT_KERNEL).to_numpy())
        twin = {key: j for j, key in enumerate(occ_b) if key is not None}
        library = np.isin(ga[S.KCLASS].to_numpy(), K.LIBRARY_CLASSES)
        t_a, t_b = ga[S.DUR].to_numpy(float), gb[S.DUR].to_numpy(float)
        for i, key in enumerate(occ_a):
            if key is None or key not in twin or t_a[i] < MIN_NS or not np.isfinite(nbytes[i]):
                continue
            rows.append({"workload": w, "library": bool(library[i]), "t_h100": t_a[i], "t_h200": t_b[twin[key]],
                         "u": nbytes[i] / (t_a[i] * 1e-9) / bandwidth})
    d = pd.DataFrame(rows)
    d["speedup"] = d["t_h100"] / d["t_h200"]
    d["u_bin"] = pd.cut(d["u"], BINS)
    return d


def table(d: pd.DataFrame) -> str:
    g = d.groupby(["library", "u_bin"], observed=True)
    out = ["| kernels | DRAM utilization on the H100 | kernels | H100 ms | median H100 / H200 time |",
           "|---|---|---:|---:|---:|"]
    for (library, u_bin), x in g:
        out.append(f"| {'library' if library else 'streaming'} | {u_bin} | {len(x)} | {x['t_h100'].sum() / 1e6:.1f} | "
                   f"{x['speedup'].median():.2f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    catalog = load_catalog()
    ratio = rates(catalog.resolve("H200")).dram_gbs / rates(catalog.resolve("H100 SXM5 80GB")).dram_gbs
    text = ("# Streaming kernels from an H100 to an H200 (benchmarks/crossarch/streaming_bandwidth.py)\n\n"
            f"The H200's achievable bandwidth is {ratio:.2f}x the H100's on the same chip, SMs and clocks; a kernel the "
            "bandwidth bounds gains that, one its SMs and clock bound gains 1.0x. Kernels of >= 3 us with known "
            f"bytes, paired by name and occurrence over {len(WORKLOADS)} steps (../shared/data/traces).\n\n"
            + table(pairs(a.shared)) + "\n")
    print(text)
    if not a.no_write:
        (a.out / "streaming_h100_h200.md").write_text(text)


if __name__ == "__main__":
    main()

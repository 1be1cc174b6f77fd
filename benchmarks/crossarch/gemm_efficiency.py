"""The two constants of the cross-chip law's kernel-choice term (scale/crossarch.py TYPICAL_EFFICIENCY,
EFFICIENCY_SLOPE; issue 32, part 3), measured on NeuSight's five GPUs' public FP32 GEMMs, and the law with each GPU
left out of them.

    python benchmarks/crossarch/gemm_efficiency.py [--shared ../shared] [--loo]

For every shape of NeuSight's sets (P100 PCIe, P4, T4, V100 PCIe 32GB, A100 PCIe 40GB; harness floor out, as
benchmarks/crossarch/gemm_kernels.py) the law splits the origin's kernel time (crossarch.predict_ns's Parts) and
e = c / (c + l (1 - 1/W)) is the fraction of the GPU's sustained FP32 rate the GEMM reaches beyond its first wave (c its
FLOPs at that rate and last-wave efficiency, l its time beyond the rate, W its waves). Over shapes of >= 2 waves and
>= 0.1 ms of kernel time, per kind (single GEMMs: linear; strided-batched: bmm):
- E, the geometric mean of e over the five GPUs;
- A, the mean least-squares slope of log e on one GPU against log e on another over the shapes both ran (every ordered
  pair): how much of one GPU's deviation from E the other shares, the shape's part of it (waves, K, tile fill) rather
  than the library's kernel choice on that GPU. E (e_o / E)^A is then the least-squares prediction of the target's e
  from the origin's (regression toward the mean, in log space).
Nothing here reads an error: the constants are statistics of the five GPUs' own kernel times. ``--loo`` scores the
law with each GPU left out of them: that GPU's pairs between the five, and its shapes predicted on our H100.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "learned"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemm_kernels as G  # noqa: E402
from habitat_trace.scale import crossarch  # noqa: E402
from habitat_trace.scale.cost import gemm_flops_bytes  # noqa: E402
from habitat_trace.scale.rates import rates  # noqa: E402
from habitat_trace.scale.specs import load_catalog  # noqa: E402
from training import data as D  # noqa: E402

MIN_WAVES, MIN_KERNEL_MS = 2, 0.1  # a share beyond the first wave to measure; above the harness's noise


def efficiencies(long: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and shape of NeuSight's five: ``e`` (module doc), ``waves`` and ``kernel_ms`` (latency less floor)."""
    cat, floors, out, host = load_catalog(), G.harness_floor_ms(long), [], G.hosts(long)
    boosts = G.boost_windows(long, floors)
    serial = rates(cat.resolve(G.H100))  # a target whose FP32 pipe runs the time beyond the rate in series
    for g, q in long.groupby("gpu"):
        r = rates(host[str(g)])  # the host that timed the set, at its own sustained rate (gemm_kernels.hosts)
        kernel_ms = boosts[g].sustained_ms(
            np.maximum(q.t_ms.to_numpy() - G.floor_at(floors, str(g), q), 0.0))
        flops, nbytes = gemm_flops_bytes(q.b, q.m, q.n, q.k, 4.0)
        n = len(q)
        tiles = crossarch.gemm_tiles(q.b, q.m, q.n, np.zeros(n, bool))
        fp32 = np.full(n, "fp32", dtype=object)
        work = crossarch.Work(t_origin=kernel_ms * 1e6, flops=np.asarray(flops), nbytes=np.asarray(nbytes), pipe=fp32,
                              pipe_target=fp32, width=np.ones(n), tiles=tiles, memory_default=np.zeros(n),
                              compute_default=np.zeros(n))
        _, parts = crossarch.predict_ns(work, r, serial, same_kernels=True)
        waves = crossarch.gemm_waves(tiles, r.sms)
        e = parts.compute / np.maximum(parts.compute + parts.latency * (1 - 1 / waves), 1e-9)
        out.append(q[G.SHAPE].assign(gpu=g, e=e, waves=waves, kernel_ms=kernel_ms))
    return pd.concat(out, ignore_index=True)


def _kinds(eff: pd.DataFrame, leave_out: str | None) -> dict[bool, pd.DataFrame]:
    d = eff[(eff.waves >= MIN_WAVES) & (eff.kernel_ms >= MIN_KERNEL_MS) & (eff.e > 0) & (eff.gpu != leave_out)]
    return {batched: d[(d.b > 1) == batched] for batched in (False, True)}


def _pairs(k: pd.DataFrame) -> list[pd.DataFrame]:
    """log e of every ordered pair of GPUs over the shapes both ran (two columns each)."""
    wide = np.log(k.pivot_table(index=G.SHAPE, columns="gpu", values="e"))
    return [x for a in wide for b in wide if a != b for x in [wide[[a, b]].dropna()] if len(x) > 2]


def constants(eff: pd.DataFrame, leave_out: str | None = None) -> tuple[dict[bool, float], dict[bool, float]]:
    """(E, A) per kind (batched or not) from ``efficiencies``, without the GPU ``leave_out``."""
    typical, slope = {}, {}
    for batched, k in _kinds(eff, leave_out).items():
        typical[batched] = float(k.e.median())
        slope[batched] = float(np.mean([np.polyfit(x.iloc[:, 0], x.iloc[:, 1], 1)[0] for x in _pairs(k)]))
    return typical, slope


def describe(eff: pd.DataFrame) -> str:
    """Per kind: rows, the mean correlation of log e between two GPUs, the skew of log e and where its mean sits."""
    out = []
    for batched, k in _kinds(eff, None).items():
        corr = np.mean([np.corrcoef(x.iloc[:, 0], x.iloc[:, 1])[0, 1] for x in _pairs(k)])
        log = np.log(k.e)
        out.append(f"{'batched' if batched else 'single'}: {len(k)} rows, correlation {corr:.2f}, skew of log e "
                   f"{log.skew():.2f}, geometric mean {np.exp(log.mean()):.3f} at the "
                   f"{100 * (log < log.mean()).mean():.0f}th percentile")
    return "\n".join(out)


def leave_one_out(long: pd.DataFrame, eff: pd.DataFrame) -> pd.DataFrame:
    """Per GPU g: the constants without g, and the law's median |error| on g's pairs between the five and on g's shapes
    predicted on our H100 (kernels >= 0.1 ms there), next to the shipped constants'."""
    rows, saved = [], (dict(crossarch.TYPICAL_EFFICIENCY), dict(crossarch.EFFICIENCY_SLOPE))
    shipped_h100, shipped_dev = G.to_h100(long), G.between_dev(long)
    try:
        for g in sorted(long.gpu.unique()):
            typical, slope = constants(eff, g)
            crossarch.TYPICAL_EFFICIENCY.update(typical)
            crossarch.EFFICIENCY_SLOPE.update(slope)
            h, dev = G.to_h100(long[long.gpu == g]), G.between_dev(long)
            mine = (dev.origin == g) | (dev.target == g)
            big, ship = h[h.h100 == ">= 0.1 ms"], shipped_h100[(shipped_h100.origin == g)]
            rows.append({"left out": g, "E single/batched": f"{typical[False]:.3f} / {typical[True]:.3f}",
                         "A single/batched": f"{slope[False]:.3f} / {slope[True]:.3f}",
                         "its pairs between the five": dev[mine].law_error.abs().median(),
                         "(shipped constants)": shipped_dev[mine].law_error.abs().median(),
                         "its shapes on the H100, >= 0.1 ms": big.law_error.abs().median(),
                         "(shipped constants) ": ship[ship.h100 == ">= 0.1 ms"].law_error.abs().median()})
    finally:
        crossarch.TYPICAL_EFFICIENCY.update(saved[0])
        crossarch.EFFICIENCY_SLOPE.update(saved[1])
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--loo", action="store_true", help="score the law with each GPU left out of the constants")
    a = ap.parse_args()
    long = D.load_neusight(a.shared / "data" / "neusight")
    eff = efficiencies(long)
    typical, slope = constants(eff)
    for batched in (False, True):
        print(f"{'batched' if batched else 'single'}: E = {typical[batched]:.3f}, A = {slope[batched]:.3f}")
    print(describe(eff))
    if a.loo:
        t = leave_one_out(long, eff)
        print(t.to_string(index=False, float_format=lambda v: f"{100 * v:.1f}%"))


if __name__ == "__main__":
    main()

"""Load the public NeuSight GEMM measurements (../shared/data/neusight, MIT) for training and evaluation.

Contract: ``load_neusight(root)`` returns one row per (op, B, M, N, K, GPU) with the latency in ms, the
recorded kernel name, grid and block, and the catalog name of the GPU, its shape in this project's order
(``standard_dims``); ``joined(long)`` keeps the shapes
measured on every GPU, one row per shape and one latency column per GPU. Never imported at predict time.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from habitat_trace.errors import SpecError
from habitat_trace.scale.specs import load_catalog

OPS = ("bmm", "linear")
SHAPE = ["op", "b", "m", "n", "k"]
# NeuSight column -> ours
COLUMNS = {"OPName": "op", "Latency": "t_ms", "Device": "device", "Kernel Name": "kernel", "B": "b", "M": "m",
           "N": "n", "K": "k", "Grid x": "grid_x", "Grid y": "grid_y", "Grid z": "grid_z", "Block x": "block_x",
           "Block y": "block_y", "Block z": "block_z", "Kernels": "kernels"}


def standard_dims(df: pd.DataFrame) -> pd.DataFrame:
    """NeuSight's (B, M, N, K) in this project's order, C[B] (M x N) = A (M x K) @ B (K x N), as the engine's
    cost.gemm_dims gives a trace's GEMM and learned.gemm_time_ratios, crossarch's tiles and gemm_microbench read them.
    NeuSight's collector (neusight/Dataset/collect.py, ``profile_kernel``) runs ``bmm(randn(B, M, N), randn(B, N, K))``
    and ``nn.Linear(N, K)`` on ``randn(B, M, N)``: its N is the reduction and its K the output's columns, and a linear
    of B > 1 is one GEMM of B x M rows (the weight is shared, not batched). The recorded launches say so: the A100's
    bmm (47, 507, 1011, 75) runs ``ampere_sgemm_128x128_nn`` on a grid of 1 x 4 x 47 (75 and 507 over 128-wide tiles),
    its linear (1, 385, 6751, 43516) ``ampere_sgemm_128x32_tn`` on 340 x 13 (43,516 over 128, 385 over 32). So bmm
    (B, M, N, K) -> (B, M, K, N), linear -> (1, B M, K, N)."""
    linear = (df["op"] == "linear").to_numpy()
    b, m, n, k = (df[c].to_numpy() for c in ("b", "m", "n", "k"))
    return df.assign(b=np.where(linear, 1, b), m=np.where(linear, b * m, m), n=k, k=n)


def load_neusight(root: Path) -> pd.DataFrame:
    """All per-kernel FP32 latencies under ``root/{bmm,linear}/*.csv``, with the GPU's catalog name, shapes in this
    project's order (``standard_dims``)."""
    root = Path(root)
    frames = []
    for op in OPS:
        for path in sorted((root / op).glob("*.csv")):
            df = pd.read_csv(path, usecols=list(COLUMNS)).rename(columns=COLUMNS)
            frames.append(df)
    if not frames:
        raise FileNotFoundError(f"{root}: no NeuSight CSVs under bmm/ or linear/")
    long = pd.concat(frames, ignore_index=True)
    catalog = load_catalog()
    names = {}
    for device in long["device"].unique():
        spec = catalog.for_device(device) or catalog.get(device)
        if spec is None:
            raise SpecError(f"{root}: GPU {device!r} is not in the catalog; add it to specs/gpus.toml")
        names[device] = spec.name
    long["gpu"] = long["device"].map(names)
    long["n_kernels"] = long["kernels"].str.count(";").astype("int64")
    long["dtype"] = "fp32"  # NeuSight's data are all FP32 SGEMM (no TF32: kernel names are *_sgemm_*)
    return standard_dims(long.drop(columns=["kernels"]))


def joined(long: pd.DataFrame) -> pd.DataFrame:
    """One row per shape measured on all GPUs: shape columns, then ``t_ms[GPU]`` and ``blocks[GPU]``,
    ``threads[GPU]`` (the recorded launch of the op's main kernel on that GPU)."""
    long = long.assign(blocks=long.grid_x * long.grid_y * long.grid_z,
                       threads=long.block_x * long.block_y * long.block_z)
    wide = long.pivot_table(index=SHAPE, columns="gpu", values=["t_ms", "blocks", "threads"], aggfunc="first")
    wide = wide.dropna()
    wide.columns = [f"{v}[{g}]" for v, g in wide.columns]
    return wide.reset_index()


def gpus(wide: pd.DataFrame) -> list[str]:
    return sorted(c[5:-1] for c in wide.columns if c.startswith("t_ms["))


def pairs(wide: pd.DataFrame, origins: list[str], targets: list[str]) -> pd.DataFrame:
    """Long table of (shape, origin GPU, target GPU) rows for every ordered pair origin != target."""
    frames = []
    for o in origins:
        for t in targets:
            if o == t:
                continue
            frames.append(wide[SHAPE].assign(origin=o, target=t, t_origin_ms=wide[f"t_ms[{o}]"],
                                             t_target_ms=wide[f"t_ms[{t}]"],
                                             blocks_origin=wide[f"blocks[{o}]"],
                                             threads_origin=wide[f"threads[{o}]"]))
    return pd.concat(frames, ignore_index=True)

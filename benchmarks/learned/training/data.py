"""Load the public NeuSight GEMM measurements (../shared/data/neusight, MIT) for training and evaluation.

Contract: ``load_neusight(root)`` returns one row per (op, B, M, N, K, GPU) with the latency in ms, the
recorded kernel name, grid and block, and the catalog name of the GPU; ``joined(long)`` keeps the shapes
measured on every GPU, one row per shape and one latency column per GPU. Never imported at predict time.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from habitat_trace.errors import SpecError
from habitat_trace.scale.specs import load_catalog

OPS = ("bmm", "linear")
SHAPE = ["op", "b", "m", "n", "k"]
# NeuSight column -> ours
COLUMNS = {"OPName": "op", "Latency": "t_ms", "Device": "device", "Kernel Name": "kernel", "B": "b", "M": "m",
           "N": "n", "K": "k", "Grid x": "grid_x", "Grid y": "grid_y", "Grid z": "grid_z", "Block x": "block_x",
           "Block y": "block_y", "Block z": "block_z", "Kernels": "kernels"}


def load_neusight(root: Path) -> pd.DataFrame:
    """All per-kernel FP32 latencies under ``root/{bmm,linear}/*.csv``, with the GPU's catalog name."""
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
    return long.drop(columns=["kernels"])


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

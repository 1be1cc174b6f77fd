"""Regenerate golden.csv: blocks per SM from NVIDIA's own cuda_occupancy.h for random launches.

    g++ -O1 -I/usr/local/cuda-13.0/include -o /tmp/occ_golden tests/data/cuda_occupancy/golden.cpp
    python tests/data/cuda_occupancy/make_golden.py /tmp/occ_golden

Device properties come from ../occupancy_limits.toml; the header supplies its own per-cc constants
(allocation units, sub-partitions, max blocks per SM, carveout steps). cc 12.0 is left out: the header
says 24 blocks per SM where the table (unverified) says 32.
"""
from __future__ import annotations

import random
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
CCS = ("6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0")
CASES_PER_CC = 400
THREADS = (1, 32, 33, 64, 96, 128, 192, 256, 384, 512, 640, 704, 768, 1024, 1025)
REGS = (0, 16, 32, 37, 64, 65, 72, 88, 128, 168, 255, 256)


def cases(lim: dict, rng: random.Random) -> list[tuple[int, int, int]]:
    optin, res = lim["shared_mem_per_block_optin_bytes"], lim["reserved_shared_mem_per_block_bytes"]
    smem_edges = (0, 24, 4096, 49152, optin - res, optin, optin + 1)
    out = []
    for _ in range(CASES_PER_CC):
        t = rng.choice(THREADS) if rng.random() < 0.4 else rng.randint(1, 1100)
        r = rng.choice(REGS) if rng.random() < 0.4 else rng.randint(0, 260)
        u = rng.random()
        s = rng.choice(smem_edges) if u < 0.3 else rng.randint(0, 16384) if u < 0.7 else rng.randint(0, optin + 2048)
        out.append((t, r, s))
    return out


def main(binary: str) -> None:
    table = tomllib.loads((HERE.parent / "occupancy_limits.toml").read_text())["occupancy"]
    rng = random.Random(20261122)
    rows, lines = [], []
    for cc in CCS:
        lim = table[cc]
        major, minor = cc.split(".")
        dev = (major, minor, lim["max_threads_per_block"], lim["max_threads_per_sm"], lim["max_registers_per_block"],
               lim["registers_per_sm"], lim["warp_size"], lim["shared_mem_per_block_default_bytes"],
               lim["shared_mem_per_sm_bytes"], lim["shared_mem_per_block_optin_bytes"],
               lim["reserved_shared_mem_per_block_bytes"])
        for t, r, s in cases(lim, rng):
            rows.append((cc, t, r, s))
            lines.append(" ".join(map(str, (*dev, t, r, s))))
    out = subprocess.run([binary], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    results = out.stdout.split("\n")
    with (HERE / "golden.csv").open("w") as f:
        f.write("# blocks per SM from cuda_occupancy.h (CUDA 13.0) via golden.cpp; see make_golden.py\n")
        f.write("cc,threads,registers,shared_mem,blocks,limiting_factors\n")
        for (cc, t, r, s), res in zip(rows, results):
            blocks, factors = res.split()
            f.write(f"{cc},{t},{r},{s},{blocks},{factors}\n")


if __name__ == "__main__":
    main(sys.argv[1])

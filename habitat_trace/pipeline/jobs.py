"""How many processes a set of traces may run in: ``plan_jobs`` caps ``--jobs`` by the CPUs and by MemAvailable /
the largest trace's estimated peak, ``PEAK_PER_BYTE`` x its uncompressed JSON (``uncompressed_size``; ingest's
chunked path measured ~2.7x, ingest/scan.py; writing the output adds its bytes). scale's batch (commands/batch.py)
and the ranks' fanout (pipeline/fanout.py, which also declares it to a Dask scheduler) plan with it.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Optional, Sequence

from habitat_trace.errors import UsageError

PEAK_PER_BYTE = 3.0  # estimated worker peak / uncompressed trace bytes (module doc)
GZIP_MAGIC = b"\x1f\x8b"


def uncompressed_size(path: Path) -> int:
    """Bytes of the JSON document: a gzip file's ISIZE footer (RFC 1952: the size mod 2^32; past 4 GiB the
    smallest value with that remainder that is not below the compressed size, a lower bound), else the file size;
    0 for what is not a regular file (a FIFO is read once, by the scaling itself)."""
    if not path.is_file():
        return 0
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(2) != GZIP_MAGIC or size < 18:
            return size
        f.seek(-4, os.SEEK_END)
        isize = struct.unpack("<I", f.read(4))[0]
    while isize < size:
        isize += 2**32
    return isize


def available_memory() -> int:
    """MemAvailable from /proc/meminfo (Linux), else the free physical pages."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def plan_jobs(sizes: Sequence[int], jobs: int, work: int, memory: Optional[int] = None) -> tuple[int, str]:
    """Workers to run: ``jobs`` capped by the ``work`` items (trace x target), the CPUs and memory / the largest
    run's estimated peak (``sizes``: each run's uncompressed bytes); a note when capped."""
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: give a positive number")
    peak = PEAK_PER_BYTE * max(sizes)
    memory = available_memory() if memory is None else memory
    by_memory = max(1, int(memory // max(peak, 1.0)))
    n = min(jobs, by_memory, os.cpu_count() or 1, work)
    note = ""
    if n < min(jobs, work):
        note = (f"--jobs {jobs} capped to {n}: {memory / 2**30:.1f} GiB available, up to {peak / 2**30:.2f} GiB "
                f"per run (~{PEAK_PER_BYTE:g}x its {peak / PEAK_PER_BYTE / 2**20:.0f} MiB JSON), "
                f"{os.cpu_count()} CPUs")
    return n, note

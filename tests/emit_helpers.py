"""Hand-built GpuSpecs and Predictions for emit tests (no catalog or engine needed)."""
from __future__ import annotations

from typing import Any

import numpy as np

from habitat_trace.ingest import schema as S
from habitat_trace.scale.gpu import GpuSpec, OccupancyLimits
from habitat_trace.scale.prediction import FALLBACK, IDENTITY, Prediction

HOPPER = OccupancyLimits(
    compute_capability="9.0", warp_size=32, max_threads_per_block=1024, max_threads_per_sm=2048,
    max_warps_per_sm=64, max_blocks_per_sm=32, registers_per_sm=65536, max_registers_per_block=65536,
    max_registers_per_thread=255, register_alloc_unit=256, warp_alloc_granularity=4,
    shared_mem_per_sm_bytes=233472, shared_mem_carveout_kib=(0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    shared_mem_per_block_optin_bytes=232448, shared_mem_alloc_unit_bytes=128,
    reserved_shared_mem_per_block_bytes=1024, source="CUDA C++ Programming Guide, cc 9.0",
)


def spec(name: str = "H100 SXM5 80GB", sms: int = 132, memory_gib: float = 79.18) -> GpuSpec:
    return GpuSpec(name=name, architecture="Hopper", compute_capability="9.0", sms=sms, boost_clock_mhz=1980.0,
                   memory_gib=memory_gib, memory_bandwidth_gbs=3350.0, l2_cache_mib=50.0, fp32_tflops=66.9,
                   tensor_tflops={"tf32": 494.7, "bf16": 989.4}, tdp_w=700.0, interconnect="NVLink 4",
                   source="test", occupancy=HOPPER, device_names=("NVIDIA H100 80GB HBM3",))


def scaled(trace: Any, factor: float = 1.0, target: GpuSpec | None = None) -> Prediction:
    """Every GPU duration x factor (>= 1 ns); identity method when factor == 1."""
    old = trace.gpu[S.DUR].to_numpy()
    dur = old if factor == 1.0 else np.maximum(np.rint(old * factor), 1).astype(np.int64)
    method = IDENTITY if factor == 1.0 else FALLBACK
    reason = "" if factor == 1.0 else f"test: x{factor}"
    n = len(old)
    return Prediction(spec(), target or spec(), dur, np.full(n, method, dtype=object),
                      np.full(n, reason, dtype=object))


def tables_of(path: Any, doc: dict[str, Any], require_gpu: bool = True) -> Any:
    """Tables from a Kineto document already parsed (the whole-document path, whose events stay a list of dicts);
    ``path`` names it in messages."""
    from pathlib import Path

    from habitat_trace.ingest.trace import _build, _meta

    return _build(Path(path), _meta(doc), doc["traceEvents"], require_gpu)


def rank_replay(trace: Any, timeline: Any, prediction: Prediction) -> Any:
    """A hand-made prediction and its replay as a rank's replay (what pipeline.Run.replay returns), on the origin's
    own host clock (nothing removed)."""
    from habitat_trace.pipeline import HostClock, Options
    from habitat_trace.pipeline.run import Rank, RankReplay
    from habitat_trace.scale.specs import load_catalog
    from habitat_trace.timeline.cpuclock import CpuClock

    clock = HostClock(CpuClock.identity(), np.zeros(0, dtype=np.int64))
    return RankReplay(Rank(trace, Options(load_catalog(None))), prediction, timeline, clock)


def write_prediction(trace: Any, timeline: Any, prediction: Prediction, out: Any,
                     extra: dict[str, Any] | None = None) -> Any:
    """The target trace of a hand-made prediction, written by emit (``extra``: more header keys)."""
    from habitat_trace.emit.writer import write_trace
    from habitat_trace.pipeline.document import target_document

    return write_trace(target_document(rank_replay(trace, timeline, prediction), extra), out)


def document_bytes(trace: Any, timeline: Any, prediction: Prediction) -> bytes:
    """The whole target document's JSON bytes, as emit streams them."""
    from habitat_trace.emit.writer import pieces
    from habitat_trace.pipeline.document import target_document

    return b"".join(pieces(target_document(rank_replay(trace, timeline, prediction))))

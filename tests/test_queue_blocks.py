"""A GPU-bound recording with full launch queues (timeline/joint.recorded_blocks, CpuClock.without): the waits the
origin GPU's pace put into its launch calls are taken out of the host, and the replay's back-pressure puts back
what the target's GPU calls for. Pins the B200 of Lambda's ResNet50 TF32 step: its host had stayed at the H100's
GPU-bound pace (57 ms of GPU idle a step, 1.07x the H100 against 1.57x published)."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.pipeline.figures import iteration_figures
from habitat_trace.pipeline.host import host_clock
from habitat_trace.timeline.cpuclock import CpuClock
from habitat_trace.timeline.joint import recorded_blocks, replay_ranks
from habitat_trace.timeline.overhead import LAUNCH_QUEUE_DEPTH
from tests.emit_helpers import scaled, tables_of

KERNEL_US = 100.0
LAUNCHES = 4 * LAUNCH_QUEUE_DEPTH  # the queue full for three quarters of the step, as a large batch keeps it


def _recording(kernel_us: float = KERNEL_US, n: int = LAUNCHES) -> dict[str, Any]:
    """One ProfilerStep of ``n`` aten::add ops, each launching one ``kernel_us`` kernel on stream 7 (6 us of host a
    launch), then a device sync: the GPU falls behind, the queue fills at LAUNCH_QUEUE_DEPTH, and from then on each
    cudaLaunchKernel returns when the kernel LAUNCH_QUEUE_DEPTH launches earlier ends (overhead.queue_delay_ns)."""
    ev: list[dict[str, Any]] = []
    t, gpu_free, ends = 1000.0, 0.0, []
    for i in range(n):
        call = t + 2
        ret = call + 3 if i < LAUNCH_QUEUE_DEPTH else max(call + 3, ends[i - LAUNCH_QUEUE_DEPTH])
        start = max(call + 5, gpu_free)
        ends.append(start + kernel_us)
        gpu_free = ends[-1]
        ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": t, "dur": ret + 1 - t,
                "args": {"External id": i + 1}},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": call,
                "dur": ret - call, "args": {"correlation": i + 1, "External id": i + 1}},
               {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": start,
                "dur": kernel_us, "args": {"device": 0, "stream": 7, "correlation": i + 1, "External id": i + 1,
                                           "grid": [1024, 1, 1], "block": [128, 1, 1], "registers per thread": 16,
                                           "shared memory": 0}}]
        t = ret + 1
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": t,
               "dur": gpu_free + 2 - t, "args": {"correlation": n + 1}})
    ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 999.0,
               "dur": gpu_free + 4 - 999.0, "args": {}})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
            "traceEvents": ev}


def _iteration_ms(trace: Any, factor: float) -> float:
    clock = host_clock(trace).clock
    joint = replay_ranks([trace], [scaled(trace, factor)], [clock])
    return iteration_figures(trace, joint.timelines[0])[0]


def test_recorded_waits_are_found_where_the_queue_was_full() -> None:
    doc = _recording()
    t = tables_of("queue.json", doc)
    at, wait = recorded_blocks(t)
    waited = [e["ts"] * 1000 for e in doc["traceEvents"] if e["name"] == "cudaLaunchKernel" and e["dur"] > 3]
    assert at.tolist() == waited  # every launch that waited for a slot (the queue fills ~1,090 launches in), none other
    # each waited for a slot: about one kernel's time less the host's own 6 us a launch
    assert np.median(wait) / 1e3 > 0.8 * (KERNEL_US - 6)


def test_a_faster_gpu_is_not_held_at_the_recorded_gpu_pace() -> None:
    t = tables_of("queue.json", _recording())
    origin = _iteration_ms(t, 1.0)
    busy = LAUNCHES * KERNEL_US / 1e3
    assert abs(origin / busy - 1) < 0.02  # the origin replays its own GPU-bound step
    # twice as fast a GPU: half the GPU time, and the host (6 us a launch) keeps up; before the recorded waits were
    # taken out the host kept ~95 of its 100 us a launch after the queue filled: 0.73x the origin, not 0.5x
    assert _iteration_ms(t, 0.5) < 0.55 * origin
    # a slower GPU: the replay's back-pressure blocks the host again
    assert abs(_iteration_ms(t, 2.0) / (2 * busy) - 1) < 0.02


@given(st.lists(st.tuples(st.integers(1, 500), st.floats(0, 1)), max_size=20),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 300)), max_size=20))
def test_taking_out_more_keeps_every_time_in_order(knots: list[tuple[int, float]],
                                                    ramps: list[tuple[int, int]]) -> None:
    # an overhead clock as overhead.py builds one: knots at event starts, C rising by at most the time between them
    gaps = np.array([g for g, _ in knots], dtype=np.int64)
    starts = np.cumsum(gaps)
    cum = np.cumsum(np.floor(gaps * np.array([f for _, f in knots])).astype(np.int64))
    clock = CpuClock.from_knots(starts, cum, 0) if len(starts) else CpuClock.identity()
    at = np.array([a for a, _ in ramps], dtype=np.int64)
    rem = np.array([r for _, r in ramps], dtype=np.int64)
    out = clock.without(at, rem)
    t = np.arange(-1000, 12_000, 7, dtype=np.int64)
    assert (np.diff(out.deprofiled(t)) >= 0).all()  # t - C(t) never decreases: threads keep their order
    before, after = clock.removed_ns(t), out.removed_ns(t)
    assert (after >= before - 1).all() and (after <= before + rem.sum() + 1).all()
    assert clock.without(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)) is clock

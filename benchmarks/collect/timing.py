"""CUDA-event timing shared by the collectors (run on a GPU machine)."""
from __future__ import annotations

from typing import Callable

import torch


def event_times_ms(step: Callable[[], None], n: int) -> list[float]:
    """Per-iteration time between CUDA events on the current stream, synchronising after each iteration."""
    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return times


def record_trace(step: Callable[[], None], path: str) -> None:
    """The collectors' trace: torch.profiler (CPU + CUDA, record_shapes) over schedule(wait=1, warmup=1, active=2),
    synchronising after each step, exported to ``path`` (gzipped by torch when it ends in .gz)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=2)) as prof:
        for _ in range(4):
            step()
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(path)

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

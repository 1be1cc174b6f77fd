"""``tensorboard_trace_handler(dir, to=[...])``: a ``torch.profiler.profile(on_trace_ready=...)`` callback that
writes the original trace as torch's own handler does (``<worker>.<ns>.pt.trace.json.gz``) and one scaled
trace per target GPU as worker ``<worker>@<GPU>``, so ``tensorboard --logdir dir`` shows them side by side.

It runs inside the training loop, so a trace that cannot be scaled (CPU-only, origin GPU not in the
catalog) never raises: the original is written and one warning says why nothing was scaled. Unknown
target names fail when the handler is made, before training starts.

``schedule(wait=, warmup=, active=)`` is ``torch.profiler.schedule`` that also notes the wall time at every step
boundary; with it, the handler writes the un-profiled steps' times (the ``wait`` steps, which the profiler does
not record) into the trace as ``habitat_unprofiled_step_ns``, and every prediction takes the origin's real
iteration from there instead of estimating the profiler's overhead (pipeline/host.py).
"""
from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from habitat_trace.errors import HabitatTraceError
from habitat_trace.ingest import schema as S

if TYPE_CHECKING:
    from torch.profiler import ProfilerAction

log = logging.getLogger(__name__)
TRACE_SUFFIX = ".pt.trace.json.gz"  # torch-tb-profiler's worker pattern: <worker>[.<span>].pt.trace.json[.gz]


class TimedSchedule:
    """A ``torch.profiler.schedule`` (same arguments) that notes ``time.perf_counter_ns()`` each time the profiler
    asks it for a step's action: at construction for step 0, then in every ``prof.step()``, i.e. at the step
    boundaries. A step k the profiler did not record (action NONE), after a step it did not record either (no
    profiler start or stop inside it), is an un-profiled step: its time is mark(k + 1) - mark(k)."""

    def __init__(self, *, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> None:
        from torch.profiler import schedule as torch_schedule

        self._inner = torch_schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
        self.marks: dict[int, tuple[int, bool]] = {}  # step -> (ns, recorded)

    def __call__(self, step: int) -> "ProfilerAction":
        from torch.profiler import ProfilerAction

        action = self._inner(step)
        self.marks[step] = (time.perf_counter_ns(), action != ProfilerAction.NONE)
        steps = self.unprofiled_steps_ns()
        if steps and action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            # into the trace being recorded (torch.profiler.profile.add_metadata_json calls this; after the
            # profiler stopped, as in on_trace_ready, it would be too late)
            import torch

            torch.autograd._add_metadata_json(S.UNPROFILED_STEP_KEY, json.dumps(steps))
        return action

    def unprofiled_steps_ns(self) -> list[int]:
        """Wall times of the un-profiled steps seen so far (see the class doc), in step order."""
        out = []
        for k in sorted(self.marks):
            if k - 1 in self.marks and k + 1 in self.marks and not self.marks[k - 1][1] and not self.marks[k][1]:
                out.append(self.marks[k + 1][0] - self.marks[k][0])
        return out


def schedule(*, wait: int = 3, warmup: int = 1, active: int = 2, repeat: int = 1, skip_first: int = 0) -> TimedSchedule:
    """``torch.profiler.schedule`` that also times the ``wait`` steps (at least 2 are needed: the first one's time
    includes the loop's start), so the trace can carry the real, un-profiled step time.

    >>> import habitat_trace
    >>> s = habitat_trace.schedule(wait=3, warmup=1, active=2)
    >>> str(s(0)), str(s(3)), str(s(4))
    ('ProfilerAction.NONE', 'ProfilerAction.WARMUP', 'ProfilerAction.RECORD')
    """
    return TimedSchedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)


def worker_tag(gpu: str) -> str:
    """The GPU as written after ``@`` in a worker name: "A100" -> "A100", "H100 SXM5" -> "H100-SXM5".

    Dots are replaced too: torch-tb-profiler reads ``.<digits>`` before ``.pt.trace.json`` as the span.
    """
    return re.sub(r"[^A-Za-z0-9_-]+", "-", gpu).strip("-") or "gpu"


def tensorboard_trace_handler(dir_name: str | Path, to: Sequence[str] = ("A100", "H100"),
                              worker_name: Optional[str] = None, **options: Any) -> Callable[[Any], list[Path]]:
    """A ``torch.profiler`` ``on_trace_ready`` handler writing the original and one trace per GPU in ``to``.

    ``worker_name`` defaults to ``{hostname}_{pid}`` (as torch's handler); ``options`` are the ones every command
    takes, by their keyword (pipeline.options.Options.of, as ``habitat_trace.open``): e.g. ``specs`` (an extra
    catalog TOML), ``origin`` (the recording GPU when its deviceProperties name is not in the catalog),
    ``cpu_speed``, ``world_size``. The handler returns the paths it wrote (torch ignores the value).

    >>> import habitat_trace
    >>> handler = habitat_trace.tensorboard_trace_handler("runs/mlp", to=["A100", "L4"])
    >>> callable(handler)
    True
    """
    from habitat_trace.pipeline import Options
    from habitat_trace.pipeline.options import ALL, split_list

    opts = Options.of(**options)  # the --specs file's name goes into the outputs, never its directory
    names = split_list(list(to))
    gpus = opts.targets(names)  # a typo fails here, not mid-training
    tags = names if len(names) == len(gpus) and ALL not in {n.lower() for n in names} else [g.name for g in gpus]
    targets = [(worker_tag(tag), gpu) for tag, gpu in zip(tags, gpus)]
    out_dir = Path(dir_name)
    warned: list[bool] = []

    def handler(prof: Any) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        stamp = time.time_ns()  # one span for the original and its scaled copies
        original = out_dir / f"{worker}.{stamp}{TRACE_SUFFIX}"
        prof.export_chrome_trace(str(original))
        try:
            return [original, *_scaled_copies(original, worker, stamp, out_dir, targets, opts)]
        except HabitatTraceError as exc:
            level = logging.DEBUG if warned else logging.WARNING
            log.log(level, "habitat-trace: wrote %s but no scaled traces to %s: %s", original,
                    ", ".join(t.name for _, t in targets), exc)
            warned.append(True)
            return [original]

    return handler


def _scaled_copies(original: Path, worker: str, stamp: int, out_dir: Path, targets: list[tuple[str, Any]],
                   options: Any) -> list[Path]:
    from habitat_trace.api import Trace
    from habitat_trace.emit.writer import write_trace
    from habitat_trace.pipeline.document import target_document

    run = Trace.read(original, options).run
    written = []
    for tag, target in targets:
        [rr] = run.replay(target).ranks
        out = out_dir / f"{worker}@{tag}.{stamp}{TRACE_SUFFIX}"
        written.append(write_trace(target_document(rr, {"worker": f"{worker}@{tag}"}), out))
        log.info("habitat-trace: wrote %s (%s -> %s)", out, rr.origin.name, target.name)
    return written

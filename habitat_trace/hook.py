"""``tensorboard_trace_handler(dir, to=[...])``: a ``torch.profiler.profile(on_trace_ready=...)`` callback that
writes the original trace as torch's own handler does (``<worker>.<ns>.pt.trace.json.gz``) and one scaled
trace per target GPU as worker ``<worker>@<GPU>``, so ``tensorboard --logdir dir`` shows them side by side.

It runs inside the training loop, so a trace that cannot be scaled (CPU-only, origin GPU not in the
catalog) never raises: the original is written and one warning says why nothing was scaled. Unknown
target names fail when the handler is made, before training starts.
"""
from __future__ import annotations

import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from habitat_trace.errors import HabitatTraceError

log = logging.getLogger(__name__)
TRACE_SUFFIX = ".pt.trace.json.gz"  # torch-tb-profiler's worker pattern: <worker>[.<span>].pt.trace.json[.gz]


def worker_tag(gpu: str) -> str:
    """The GPU as written after ``@`` in a worker name: "A100" -> "A100", "H100 SXM5" -> "H100-SXM5".

    Dots are replaced too: torch-tb-profiler reads ``.<digits>`` before ``.pt.trace.json`` as the span.
    """
    return re.sub(r"[^A-Za-z0-9_-]+", "-", gpu).strip("-") or "gpu"


def tensorboard_trace_handler(dir_name: str | Path, to: Sequence[str] = ("A100", "H100"),
                              worker_name: Optional[str] = None, specs: str | Path | None = None,
                              origin: Optional[str] = None) -> Callable[[Any], list[Path]]:
    """A ``torch.profiler`` ``on_trace_ready`` handler writing the original and one trace per GPU in ``to``.

    ``worker_name`` defaults to ``{hostname}_{pid}`` (as torch's handler); ``specs`` is an extra catalog TOML;
    ``origin`` names the recording GPU when its deviceProperties name is not in the catalog. The handler
    returns the paths it wrote (torch ignores the value).

    >>> import habitat_trace
    >>> handler = habitat_trace.tensorboard_trace_handler("runs/mlp", to=["A100", "L4"])
    >>> callable(handler)
    True
    """
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(Path(specs) if specs else None)
    targets = [(worker_tag(name), catalog.resolve(name)) for name in to]  # a typo fails here, not mid-training
    out_dir = Path(dir_name)
    spec_info = {"specs_file": str(specs) if specs else None}
    warned: list[bool] = []

    def handler(prof: Any) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        stamp = time.time_ns()  # one span for the original and its scaled copies
        original = out_dir / f"{worker}.{stamp}{TRACE_SUFFIX}"
        prof.export_chrome_trace(str(original))
        try:
            return [original, *_scale(original, worker, stamp, out_dir, targets, catalog, origin, spec_info)]
        except HabitatTraceError as exc:
            level = logging.DEBUG if warned else logging.WARNING
            log.log(level, "habitat-trace: wrote %s but no scaled traces: %s", original, exc)
            warned.append(True)
            return [original]

    return handler


def _scale(original: Path, worker: str, stamp: int, out_dir: Path, targets: list[tuple[str, Any]],
           catalog: Any, origin: Optional[str], spec_info: dict[str, Any]) -> list[Path]:
    from habitat_trace import pipeline
    from habitat_trace.emit.writer import write_trace
    from habitat_trace.errors import UnsupportedTraceError
    from habitat_trace.ingest import load

    trace = load(original, require_gpu=False)
    if len(trace.gpu) == 0:
        names = ", ".join(t.name for _, t in targets)
        raise UnsupportedTraceError(
            f"no GPU kernels to scale to {names} (CPU-only profile); profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a CUDA device")
    src = pipeline.resolve_origin(trace, catalog, origin)
    written = []
    for tag, target in targets:
        scaled = pipeline.scale(trace, src, target)
        out = out_dir / f"{worker}@{tag}.{stamp}{TRACE_SUFFIX}"
        info = {"input": str(original), "worker": f"{worker}@{tag}", **spec_info}
        written.append(write_trace(trace, scaled.timeline, scaled.prediction, out, info))
        log.info("habitat-trace: wrote %s (%s -> %s)", out, src.name, target.name)
    return written

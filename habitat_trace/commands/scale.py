"""``habitat-trace scale``: load -> resolve origin -> per target: predict, replay, write, one summary line.

Several ``--to``: OUT must be an existing directory (nothing is created, so a typo cannot scatter
files); each target is written as ``<stem>.<gpu-slug>.pt.trace.json.gz`` (TensorBoard lists them as
workers). One ``--to``: OUT is the file (gzip when it ends in .gz), ``-`` for stdout (plain JSON; the
summary line then goes to stderr), or an existing directory. ``--to`` takes comma-separated names or ``all``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from habitat_trace.errors import OutputError, SpecError

TRACE_SUFFIX = re.compile(r"(\.pt)?\.trace\.json(\.gz)?$|\.json(\.gz)?$")


def slug(name: str) -> str:
    """File-name form of a GPU name: "H100 SXM5 80GB" -> "h100-sxm5-80gb"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def stem(path: Path) -> str:
    return TRACE_SUFFIX.sub("", path.name) or path.name


def output_paths(trace_path: Path, out: Path, targets: list[str]) -> list[Path]:
    if str(out) == "-":
        if len(targets) > 1:
            raise OutputError("-o - writes one trace to stdout; for several --to give an existing directory")
        return [out]
    if len(targets) > 1 or out.is_dir():
        if not out.is_dir():
            raise OutputError(f"{out}: with several --to, -o must be an existing directory; create it first")
        return [out / f"{stem(trace_path)}.{slug(t)}.pt.trace.json.gz" for t in targets]
    return [out]


def resolve_origin(trace: Any, catalog: Any, origin: Optional[str]) -> Any:
    if origin:
        return catalog.resolve(origin)
    spec = catalog.for_device(trace.device_name) if trace.device_name else None
    if spec is None and not trace.device_name:
        raise SpecError(f"{trace.path}: the trace names no GPU (no deviceProperties); "
                        "name the origin GPU with --from GPU (see `habitat-trace gpus`)")
    if spec is None:
        raise SpecError(f"{trace.path}: origin GPU {trace.device_name!r} is not in the catalog; "
                        "name it with --from GPU (see `habitat-trace gpus`)")
    return spec


def run(trace: Path, to: list[str], out: Path, specs: Optional[Path], origin: Optional[str]) -> None:
    from habitat_trace.commands.common import note, progress, target_names, warn
    from habitat_trace.timeline.replay import replay
    from habitat_trace.analysis.steps import describe
    from habitat_trace.emit.writer import check_output, is_stdout, write_trace
    from habitat_trace.ingest import load
    from habitat_trace.scale.engine import predict
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    targets = [catalog.resolve(name) for name in target_names(to, catalog)]  # unknown names fail before any work
    paths = output_paths(Path(trace), Path(out), [t.name for t in targets])
    for p in paths:
        check_output(p, (Path(trace),))
    # the input by file name only: an absolute path leaks the user's directories when the output is shared
    info = {"input": Path(trace).name, "specs_file": Path(specs).name if specs else None}
    with progress(f"reading {Path(trace).name}") as step:
        loaded = load(trace)
        src = resolve_origin(loaded, catalog, origin)
        for target, path in zip(targets, paths):
            step(f"{target.name}: predicting {len(loaded.gpu)} GPU events from {src.name}")
            prediction = predict(loaded, src, target)
            for w in prediction.warnings:  # they also travel with the output (habitat_trace.warnings)
                warn(f"{target.name}: {w}")
            step(f"{target.name}: replaying")
            timeline = replay(loaded, prediction)
            step(f"{target.name}: writing {'stdout' if is_stdout(path) else path.name}")
            written = write_trace(loaded, timeline, prediction, path, info)
            note(describe(loaded, timeline, prediction, Path("stdout") if is_stdout(written) else written),
                 err=is_stdout(written))

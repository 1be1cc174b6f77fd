"""``habitat-trace scale``: load -> resolve origin -> per target: predict, replay, write, one summary line.

Several ``--to``: OUT must be an existing directory (nothing is created, so a typo cannot scatter
files); each target is written as ``<stem>.<gpu-slug>.pt.trace.json.gz`` (TensorBoard lists them as
workers). One ``--to``: OUT is the file (gzip when it ends in .gz), or an existing directory.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import typer

from habitat_trace.errors import OutputError, SpecError

TRACE_SUFFIX = re.compile(r"(\.pt)?\.trace\.json(\.gz)?$|\.json(\.gz)?$")


def slug(name: str) -> str:
    """File-name form of a GPU name: "H100 SXM5 80GB" -> "h100-sxm5-80gb"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def stem(path: Path) -> str:
    return TRACE_SUFFIX.sub("", path.name) or path.name


def output_paths(trace_path: Path, out: Path, targets: list[str]) -> list[Path]:
    if len(targets) > 1 or out.is_dir():
        if not out.is_dir():
            raise OutputError(f"{out}: with several --to, -o must be an existing directory; create it first")
        return [out / f"{stem(trace_path)}.{slug(t)}.pt.trace.json.gz" for t in targets]
    return [out]


def resolve_origin(trace: Any, catalog: Any, origin: Optional[str]) -> Any:
    if origin:
        return catalog.resolve(origin)
    spec = catalog.for_device(trace.device_name) if trace.device_name else None
    if spec is None and trace.device_properties:  # ROCm's generic "AMD Radeon Graphics": CUs, memory, GFXIP
        spec = catalog.for_properties(trace.device_properties)
    if spec is None and not trace.device_name:
        raise SpecError(f"{trace.path}: the trace names no GPU (no deviceProperties); "
                        "name the origin GPU with --from GPU (see `habitat-trace gpus`)")
    if spec is None:
        raise SpecError(f"{trace.path}: origin GPU {trace.device_name!r} is not in the catalog; "
                        "name it with --from GPU (see `habitat-trace gpus`)")
    return spec


def run(trace: Path, to: list[str], out: Path, specs: Optional[Path], origin: Optional[str]) -> None:
    from habitat_trace.timeline.replay import replay
    from habitat_trace.analysis.steps import describe
    from habitat_trace.emit.writer import check_output, write_trace
    from habitat_trace.ingest import load
    from habitat_trace.scale.engine import predict
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    targets = [catalog.resolve(name) for name in to]  # unknown names fail before any work
    paths = output_paths(Path(trace), Path(out), [t.name for t in targets])
    for p in paths:
        check_output(p, (Path(trace),))
    loaded = load(trace)
    src = resolve_origin(loaded, catalog, origin)
    info = {"input": str(trace), "specs_file": str(specs) if specs else None}
    for target, path in zip(targets, paths):
        prediction = predict(loaded, src, target)
        for w in prediction.warnings:  # they also travel with the output (habitat_trace.warnings)
            typer.echo(f"warning: {target.name}: {w}", err=True)
        timeline = replay(loaded, prediction)
        written = write_trace(loaded, timeline, prediction, path, info)
        typer.echo(describe(loaded, timeline, prediction, written))

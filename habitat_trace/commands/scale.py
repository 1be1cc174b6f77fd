"""``habitat-trace scale``: load -> resolve origin -> per target: predict, replay, write, one summary line.

Several ``--to``: OUT must be an existing directory (nothing is created, so a typo cannot scatter
files); each target is written as ``<stem>.<gpu-slug>.pt.trace.json.gz`` (TensorBoard lists them as
workers). One ``--to``: OUT is the file (gzip when it ends in .gz), ``-`` for stdout (plain JSON; the
summary line then goes to stderr), or an existing directory. ``--to`` takes comma-separated names or ``all``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from habitat_trace.errors import OutputError

if TYPE_CHECKING:
    from habitat_trace import pipeline

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


def run(trace: Path, to: list[str], out: Path, specs: Optional[Path], origin: Optional[str],
        whatif: Optional[dict[str, Any]] = None, host: Optional[pipeline.Host] = None) -> None:
    from habitat_trace import pipeline
    from habitat_trace.commands.common import note, progress, target_names, warn
    from habitat_trace.emit.writer import check_output, is_stdout, write_trace
    from habitat_trace.ingest import load
    from habitat_trace.scale.collective import with_deployment
    from habitat_trace.scale.specs import load_catalog

    catalog = load_catalog(specs)
    targets = [with_deployment(catalog.resolve(name), **(whatif or {}))
               for name in target_names(to, catalog)]  # unknown names fail before any work
    paths = output_paths(Path(trace), Path(out), [t.name for t in targets])
    for p in paths:
        check_output(p, (Path(trace),))
    # the input by file name only: an absolute path leaks the user's directories when the output is shared
    info = {"input": Path(trace).name, "specs_file": Path(specs).name if specs else None}
    with progress(f"reading {Path(trace).name}") as step:
        loaded = load(trace)
        src = pipeline.resolve_origin(loaded, catalog, origin)
        step("estimating the profiler's overhead")
        clock = pipeline.host_clock(loaded, host or pipeline.Host())
        base = pipeline.headline(pipeline.scale(loaded, src, src, clock=clock))
        for target, path in zip(targets, paths):
            step(f"{target.name}: predicting {len(loaded.gpu)} GPU events from {src.name} and replaying")
            scaled = pipeline.scale(loaded, src, target, clock=clock)
            for w in scaled.prediction.warnings:  # they also travel with the output (habitat_trace.warnings)
                warn(f"{target.name}: {w}")
            step(f"{target.name}: writing {'stdout' if is_stdout(path) else path.name}")
            written = write_trace(loaded, scaled.timeline, scaled.prediction, path, {**info, **scaled.record()})
            note(describe(base, scaled, Path("stdout") if is_stdout(written) else written), err=is_stdout(written))


def describe(base: tuple[float, float, str], scaled: pipeline.Scaled, path: Path) -> str:
    """The one-line summary: origin -> target, the iteration time and GPU busy time per step as ``compare``
    reports them (``base``: the origin's pipeline.headline), and the file written."""
    from habitat_trace import pipeline

    it0, busy0, _ = base
    it, busy, _ = pipeline.headline(scaled)
    return (f"{scaled.origin.name} -> {scaled.target.name}: iteration {it0:.3f} -> {it:.3f} ms, "
            f"GPU busy {busy0:.3f} -> {busy:.3f} ms per step; wrote {path}")

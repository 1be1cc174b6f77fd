"""What every command, the API and the hook take, parsed once so it means the same everywhere: the GPU catalog
(with a ``--specs`` file), the origin GPU (``--from``), the target host (``--cpu-speed``,
``--keep-profiler-overhead``), the deployment what-ifs for collectives, the ``--to`` list and ``--price``.

Names are checked here, before any trace is read: an unknown GPU is a SpecError with close matches.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from habitat_trace.errors import HabitatTraceError, SpecError
from habitat_trace.pipeline.host import Host
from habitat_trace.scale.collective import INTERCONNECTS, with_deployment
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.specs import Catalog, load_catalog

ALL = "all"  # --to all: the whole catalog


@dataclass(frozen=True)
class Deployment:
    """What-ifs for the target's collectives (scale/collective.py); None: the target's usual node (catalog)."""

    interconnect: Optional[str] = None
    gpus_per_node: Optional[int] = None
    nodes: Optional[int] = None

    def __post_init__(self) -> None:
        if self.interconnect is not None and self.interconnect not in INTERCONNECTS:
            raise HabitatTraceError(f"--interconnect {self.interconnect!r}: choose one of {', '.join(INTERCONNECTS)}")
        for flag, v in (("--gpus-per-node", self.gpus_per_node), ("--nodes", self.nodes)):
            if v is not None and v < 1:
                raise HabitatTraceError(f"{flag} {v}: give a positive number")

    def apply(self, spec: GpuSpec) -> GpuSpec:
        return with_deployment(spec, **asdict(self))


@dataclass(frozen=True)
class Options:
    """The catalog and the options a run is predicted with (module doc)."""

    catalog: Catalog
    specs_file: Optional[str] = None  # the --specs file's name, as written traces record it (never its directory)
    origin: Optional[str | GpuSpec] = None  # --from: the recording GPU, when deviceProperties do not name it
    host: Host = field(default_factory=Host)
    deployment: Deployment = field(default_factory=Deployment)

    @classmethod
    def load(cls, specs: str | Path | None = None, origin: Optional[str] = None, host: Host = Host(),
             deployment: Deployment = Deployment()) -> "Options":
        """The packaged catalog with ``specs`` added; ``origin`` is checked against it."""
        if not host.cpu_speed > 0 or not math.isfinite(host.cpu_speed):
            raise HabitatTraceError(f"--cpu-speed {host.cpu_speed}: give a positive ratio, e.g. 1.5")
        catalog = load_catalog(Path(specs) if specs else None)
        if origin:
            catalog.resolve(origin)
        return cls(catalog, Path(specs).name if specs else None, origin, host, deployment)

    def targets(self, to: str | Sequence[str]) -> list[GpuSpec]:
        """``--to`` values (repeated, comma-separated, or ``all``) -> catalog GPUs with the deployment what-ifs, in
        order, each once. Unknown names fail here (SpecError with close matches)."""
        names: list[str] = []
        for n in split_list([to] if isinstance(to, str) else to):
            for name in ([s.name for s in self.catalog.specs] if n.lower() == ALL else [self.catalog.resolve(n).name]):
                if name not in names:
                    names.append(name)
        if not names:
            raise SpecError("--to: name at least one GPU, e.g. --to H100,A100,L4 (or --to all)")
        return [self.deployment.apply(self.catalog.resolve(n)) for n in names]

    def prices(self, items: Sequence[str]) -> dict[str, float]:
        """``--price`` values (repeated or comma-separated ``GPU=USD``) -> {catalog name: USD per hour}; one error
        line for a malformed entry, SpecError for an unknown GPU."""
        out = {}
        for item in split_list(items):
            name, sep, usd = item.partition("=")
            try:
                value = float(usd)
            except ValueError:
                value = float("nan")
            if not sep or not name.strip() or not math.isfinite(value) or value < 0:
                raise HabitatTraceError(f"--price {item!r}: write GPU=USD per hour, e.g. --price L4=0.80,T4=0.35")
            out[self.catalog.resolve(name.strip()).name] = value
        return out


def split_list(items: Sequence[str]) -> list[str]:
    """Repeated and comma-separated option values, stripped, empty ones dropped."""
    return [n.strip() for item in items for n in item.split(",") if n.strip()]

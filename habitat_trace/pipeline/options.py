"""What every command, the API and the hook take, parsed once so it means the same everywhere: the GPU catalog
(with a ``--specs`` file), the origin GPU (``--from``), the target host (``--cpu-speed``,
``--keep-profiler-overhead``), the deployment what-ifs for collectives, the data-parallel scale-out of a one-GPU
trace (``--world-size``, ``--strategy``, ``--bucket-mb``), the ``--to`` list and ``--price``.

Names are checked here, before any trace is read: an unknown GPU is a SpecError with close matches.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from habitat_trace.errors import SpecError, UsageError
from habitat_trace.pipeline.host import Host
from habitat_trace.scale.collective import INTERCONNECTS, with_deployment
from habitat_trace.scale.dataparallel import DEFAULT_BUCKET_MB, STRATEGIES, ScaleOut
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
            raise UsageError(f"--interconnect {self.interconnect!r}: choose one of {', '.join(INTERCONNECTS)}")
        for flag, v in (("--gpus-per-node", self.gpus_per_node), ("--nodes", self.nodes)):
            if v is not None and v < 1:
                raise UsageError(f"{flag} {v}: give a positive number")

    def apply(self, spec: GpuSpec) -> GpuSpec:
        return with_deployment(spec, **asdict(self))

    def whatif(self) -> Optional[str]:
        """The what-ifs as a row names them ("pcie, 8 GPUs a node, 2 nodes"); None when none is set."""
        parts = [self.interconnect or "", f"{self.gpus_per_node} GPUs a node" if self.gpus_per_node else "",
                 f"{self.nodes} nodes" if self.nodes else ""]
        return ", ".join(p for p in parts if p) or None


@dataclass(frozen=True)
class DataParallel:
    """A one-GPU step predicted as one rank of ``world_size`` (scale/dataparallel.py, timeline/scaleout.py): DDP's
    gradient buckets of ``bucket_mb`` MiB, or FSDP's units. World size 1 (the default): the trace as recorded."""

    world_size: int = 1
    strategy: str = STRATEGIES[0]
    bucket_mb: float = DEFAULT_BUCKET_MB

    def __post_init__(self) -> None:
        if isinstance(self.world_size, bool) or not isinstance(self.world_size, int) or self.world_size < 1:
            raise UsageError(f"--world-size {self.world_size}: give the number of GPUs (ranks), 1 or more")
        if self.strategy not in STRATEGIES:
            raise UsageError(f"--strategy {self.strategy!r}: choose {' or '.join(STRATEGIES)}")
        if not (isinstance(self.bucket_mb, (int, float)) and math.isfinite(self.bucket_mb) and self.bucket_mb > 0):
            raise UsageError(f"--bucket-mb {self.bucket_mb}: give a positive size in MiB, e.g. "
                             f"{DEFAULT_BUCKET_MB:g} (DDP's default)")

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def plan(self, deployment: Deployment) -> ScaleOut:
        """The scale-out with the deployment what-ifs (None fields: the target's usual node)."""
        return ScaleOut(self.world_size, self.strategy, float(self.bucket_mb), interconnect=deployment.interconnect,
                        gpus_per_node=deployment.gpus_per_node, nodes=deployment.nodes)


@dataclass(frozen=True)
class Options:
    """The catalog and the options a run is predicted with (module doc)."""

    catalog: Catalog
    specs_file: Optional[str] = None  # the --specs file's name, as written traces record it (never its directory)
    origin: Optional[str | GpuSpec] = None  # --from: the recording GPU, when deviceProperties do not name it
    host: Host = field(default_factory=Host)
    deployment: Deployment = field(default_factory=Deployment)
    data_parallel: DataParallel = field(default_factory=DataParallel)

    def __post_init__(self) -> None:
        nodes, world = self.deployment.nodes, self.data_parallel.world_size
        if self.data_parallel.active and nodes is not None and nodes > world:
            raise UsageError(f"--nodes {nodes}: more nodes than --world-size {world} ranks; give at most "
                             f"{world}")

    @classmethod
    def load(cls, specs: str | Path | None = None, origin: Optional[str] = None, host: Host = Host(),
             deployment: Deployment = Deployment(), data_parallel: DataParallel = DataParallel()) -> "Options":
        """The packaged catalog with ``specs`` added; ``origin`` is checked against it."""
        if not host.cpu_speed > 0 or not math.isfinite(host.cpu_speed):
            raise UsageError(f"--cpu-speed {host.cpu_speed}: give a positive ratio, e.g. 1.5")
        catalog = load_catalog(Path(specs) if specs else None)
        if origin:
            catalog.resolve(origin)
        return cls(catalog, Path(specs).name if specs else None, origin, host, deployment, data_parallel)

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
                raise UsageError(f"--price {item!r}: write GPU=USD per hour, e.g. --price L4=0.80,T4=0.35")
            out[self.catalog.resolve(name.strip()).name] = value
        return out


def split_list(items: Sequence[str]) -> list[str]:
    """Repeated and comma-separated option values, stripped, empty ones dropped."""
    return [n.strip() for item in items for n in item.split(",") if n.strip()]

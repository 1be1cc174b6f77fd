"""What every command, the API and the hook take, parsed once so it means the same everywhere: the GPU catalog
(with a ``--specs`` file), the origin GPU (``--from``), the target host (``--cpu-speed``,
``--keep-profiler-overhead``), the deployment what-ifs for collectives, the data-parallel scale-out of a one-GPU
trace (``--world-size``, ``--strategy``, ``--bucket-mb``), the ``--to`` list and ``--price``.

``Options.of(**keywords)`` is the one keyword -> Options map (KEYWORDS: each option by its flag's name, ``--from`` as
``origin``): the CLI passes its options through it, ``habitat_trace.open(path, **options)`` and the hook
``tensorboard_trace_handler(dir, to, **options)`` theirs; ``Options.but`` changes some of them. A new option is one
keyword here (a field of a part, or a part) and one flag in cli.py. Values and names are checked here, before any
trace is read: a bad value is a UsageError, an unknown GPU a SpecError with close matches.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from habitat_trace.errors import SpecError, UsageError
from habitat_trace.pipeline.host import Host, step_ms
from habitat_trace.scale.collective import INTERCONNECTS, with_deployment
from habitat_trace.scale.dataparallel import DEFAULT_BUCKET_MB, STRATEGIES, WRAPS, ScaleOut
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
    gradient buckets of ``bucket_mb`` MiB, or FSDP's units (``fsdp_wrap``: each repeated block, scale/units.py, or
    none: the whole model one unit). World size 1 (the default): the trace as recorded."""

    world_size: int = 1
    strategy: str = STRATEGIES[0]
    bucket_mb: float = DEFAULT_BUCKET_MB
    fsdp_wrap: str = WRAPS[0]
    broadcast_buffers: bool = True  # DDP(broadcast_buffers=...), its default

    def __post_init__(self) -> None:
        if isinstance(self.world_size, bool) or not isinstance(self.world_size, int) or self.world_size < 1:
            raise UsageError(f"--world-size {self.world_size}: give the number of GPUs (ranks), 1 or more")
        if self.strategy not in STRATEGIES:
            raise UsageError(f"--strategy {self.strategy!r}: choose {' or '.join(STRATEGIES)}")
        if not (isinstance(self.bucket_mb, (int, float)) and math.isfinite(self.bucket_mb) and self.bucket_mb > 0):
            raise UsageError(f"--bucket-mb {self.bucket_mb}: give a positive size in MiB, e.g. "
                             f"{DEFAULT_BUCKET_MB:g} (DDP's default)")
        if self.fsdp_wrap not in WRAPS:
            raise UsageError(f"--fsdp-wrap {self.fsdp_wrap!r}: choose {' or '.join(WRAPS)} (blocks: a unit per "
                             "repeated block, as ModuleWrapPolicy over them; none: fully_shard on the root alone)")
        if not isinstance(self.broadcast_buffers, bool):
            raise UsageError(f"broadcast_buffers {self.broadcast_buffers!r}: give True (DDP's default) or False")

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def plan(self, deployment: Deployment) -> ScaleOut:
        """The scale-out with the deployment what-ifs (None fields: the target's usual node)."""
        return ScaleOut(self.world_size, self.strategy, float(self.bucket_mb), interconnect=deployment.interconnect,
                        gpus_per_node=deployment.gpus_per_node, nodes=deployment.nodes, fsdp_wrap=self.fsdp_wrap,
                        broadcast_buffers=self.broadcast_buffers)


# keyword -> the part of Options it sets (the part's field of that name); "specs" and "origin" are read against the
# catalog by Options.but
PARTS = {"cpu_speed": "host", "keep_profiler_overhead": "host", "measured_step_ms": "host", "interconnect": "deployment",
         "gpus_per_node": "deployment", "nodes": "deployment", "world_size": "data_parallel",
         "strategy": "data_parallel", "bucket_mb": "data_parallel", "fsdp_wrap": "data_parallel",
         "broadcast_buffers": "data_parallel"}
# "measured_step" is the user's text (--measured-step: ms or it/s), read into the host's measured_step_ms
KEYWORDS = ("specs", "origin", *(k for k in PARTS if k != "measured_step_ms"), "measured_step")


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
        if not self.host.cpu_speed > 0 or not math.isfinite(self.host.cpu_speed):
            raise UsageError(f"--cpu-speed {self.host.cpu_speed}: give a positive ratio, e.g. 1.5")
        nodes, world = self.deployment.nodes, self.data_parallel.world_size
        if self.data_parallel.active and nodes is not None and nodes > world:
            raise UsageError(f"--nodes {nodes}: more nodes than --world-size {world} ranks; give at most {world}")

    @classmethod
    def of(cls, **keywords: Any) -> "Options":
        """The packaged catalog and the defaults, with ``keywords`` (KEYWORDS): ``specs`` (a catalog TOML added),
        ``origin`` (``--from``: a GPU name, checked against the catalog), ``cpu_speed``, ``keep_profiler_overhead``,
        ``interconnect``, ``gpus_per_node``, ``nodes``, ``world_size``, ``strategy``, ``bucket_mb``, ``fsdp_wrap``,
        ``broadcast_buffers``,
        ``measured_step`` (the user's un-profiled origin step: ms, "3.1ms" or "320it/s"; pipeline.host.step_ms); None,
        or a keyword left out, is the default."""
        return cls(load_catalog()).but(**keywords)

    def but(self, **changes: Any) -> "Options":
        """These options with ``changes`` (Options.of's keywords; None leaves one as it is); ``origin`` may be a
        GpuSpec (a scaled trace's: its target)."""
        unknown = sorted(set(changes) - set(KEYWORDS))
        if unknown:
            raise TypeError(f"unknown option {unknown[0]!r}; the options are {', '.join(KEYWORDS)}")
        out: dict[str, Any] = {}
        if "specs" in changes:
            specs = changes["specs"]
            out.update(catalog=load_catalog(Path(specs) if specs else None), specs_file=Path(specs).name if specs
                       else None)
        if "origin" in changes:
            out["origin"] = changes["origin"] or None
        if isinstance(out.get("origin", self.origin), str):
            out.get("catalog", self.catalog).resolve(out.get("origin", self.origin))
        given = changes.get("measured_step")
        changes = {**changes, **({"measured_step_ms": step_ms(given)} if given is not None else {})}
        for part in dict.fromkeys(PARTS.values()):
            mine = {k: v for k, v in changes.items() if PARTS.get(k) == part and v is not None}
            if mine:
                out[part] = replace(getattr(self, part), **mine)
        return replace(self, **out)

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

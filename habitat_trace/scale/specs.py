"""Load the GPU catalog (specs/gpus.toml, plus an optional user ``--specs`` file) into frozen GpuSpec objects.

Contract: ``load_catalog(extra)`` returns a Catalog whose ``resolve`` maps a catalog name, alias or torch
deviceProperties name (any case; spaces, dashes and underscores ignored) to a GpuSpec, or raises SpecError with
close matches. Every value is validated; a bad file gives one SpecError line naming the file, the table and the key.

A user entry may say ``base = "NAME"`` to inherit every field of a catalog (or same-file) GPU except its
device_names and aliases, and override some: a hypothetical GPU for what-if questions. When such an entry changes
``sms`` or ``boost_clock_mhz`` but gives no compute peaks, the inherited FP32/tensor peaks are scaled by
(SMs x clock) relative to the base, because peak FLOP/s is SMs x FLOP/clk/SM x clock; memory bandwidth and L2 are
kept. (Measured on an H200 with green contexts: an fp32 matmul takes 2.02x as long on 64 of 132 SMs, 132/64 = 2.06.)
The sustained figures (issue 25) follow their peaks: sustained GEMM rates scale by SMs x clock, the sustained clock by
the clock ratio, the achievable bandwidth by the datasheet bandwidth's ratio. The source records what was scaled, and
``base_spec`` the resolved base (the engine predicts on it what only a catalog GPU has a model for).
An entry that lowers ``tdp_w`` (the board power limit, `nvidia-smi -pl`) and gives no clock of its own runs at
(P / P_base)^(1/3) of the base's clock (dynamic power ~ f^3, scale/rates.py), so its peaks and sustained figures
follow as for a lower clock; raising the limit above the base's changes nothing (the catalog's figures are at the
stock limit, and more power does not raise a clock past its boost).
"""
from __future__ import annotations

import difflib
import functools
import logging
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Optional

from habitat_trace.errors import SpecError
from habitat_trace.scale import spec_fields as F
from habitat_trace.scale.gpu import GpuSpec, OccupancyLimits, Price

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

log = logging.getLogger(__name__)

SPECS_FILE = Path(__file__).resolve().parent.parent / "specs" / "gpus.toml"
HINT = "see `habitat-trace gpus`"
# Peaks that follow SMs x clock when a what-if entry changes either and does not give the peak itself.
SCALED_PEAKS = ("fp32_tflops", *(f"{d}_tensor_tflops" for d in F.TENSOR_DTYPES), "fp64_tflops",
                "fp64_tensor_tflops", "fp16_nontensor_tflops", "fp16acc_tensor_tflops", "int8_tensor_tops",
                "fp4_tensor_tflops", "fp32_gemm_sustained_tflops",
                *(f"tensor_sustained_tflops_{d}" for d in ("fp16", "bf16", "tf32", "fp8")))
# Sustained figures that follow one datasheet field's ratio when a what-if entry changes it: (key, field it follows)
SCALED_WITH = (("sm_clock_sustained_mhz", "boost_clock_mhz"), ("tensor_clock_mhz_implied", "boost_clock_mhz"),
               ("memory_bandwidth_achievable_gbs", "memory_bandwidth_gbs"))
_SEPARATORS = re.compile(r"[\s_\-]+")
MEMORY_MATCH = 0.05  # a device reports slightly less than the nominal memory (MI250 GCD: 63.98 of 64 GiB)


def normalize(name: str) -> str:
    """Lookup key for a GPU name: case-folded, without spaces, dashes and underscores."""
    return _SEPARATORS.sub("", name).casefold()


@dataclass(frozen=True, eq=False)
class Catalog:
    """All known GPUs (catalog order, then user entries) and the occupancy limits per compute capability."""

    specs: tuple[GpuSpec, ...]
    occupancy: Mapping[str, OccupancyLimits]
    _by_key: Mapping[str, GpuSpec] = field(repr=False)
    _by_device: Mapping[str, GpuSpec] = field(repr=False)
    _raw: Mapping[str, Mapping[str, object]] = field(repr=False)  # validated fields per name, for base=

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    def get(self, name: str) -> Optional[GpuSpec]:
        return self._by_key.get(normalize(name))

    def resolve(self, name: str) -> GpuSpec:
        """Catalog name, alias or deviceProperties name -> GpuSpec; SpecError with close matches otherwise."""
        spec = self.get(name) if name.strip() else None
        if spec is None:
            raise SpecError(f"unknown GPU {name!r}{self._suggest(name)}; {HINT}")
        return spec

    def for_device(self, device_name: str) -> Optional[GpuSpec]:
        """The spec for a torch/Kineto deviceProperties name, or None when the catalog does not list it."""
        return self._by_device.get(normalize(device_name))

    def for_properties(self, props: Mapping[str, object]) -> Optional[GpuSpec]:
        """The AMD entry a ROCm deviceProperties entry describes, when its name does not say (ROCm often reports
        "AMD Radeon Graphics"): same CU count (numSms), GFXIP (computeMajor.computeMinor) and memory within
        MEMORY_MATCH. Several matches (an MI210 and an MI250 GCD are alike in all three) resolve to the first in
        catalog order, with a warning; None when nothing matches or the device is not AMD (warpSize 64)."""
        try:
            cus, warp = int(props.get("numSms", 0)), int(props.get("warpSize", 0))  # type: ignore[call-overload]
            version = (int(props.get("computeMajor", -1)), int(props.get("computeMinor", -1)))  # type: ignore[call-overload]
            gib = float(props.get("totalGlobalMem", 0)) / 2**30  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        if warp != 64:
            return None
        hits = [s for s in self.specs if s.vendor == "amd" and s.base is None and s.sms == cus
                and s.compute_version == version and abs(gib - s.memory_gib) <= MEMORY_MATCH * s.memory_gib]
        if len(hits) > 1:
            log.warning("deviceProperties %r (%d CUs, GFXIP %d.%d, %.0f GiB) match %s; taking %s (name the origin "
                        "with --from to choose)", props.get("name"), cus, *version, gib,
                        ", ".join(s.name for s in hits), hits[0].name)
        return hits[0] if hits else None

    def _suggest(self, name: str) -> str:
        keys = difflib.get_close_matches(normalize(name), list(self._by_key), n=8, cutoff=0.5)
        names = list(dict.fromkeys(self._by_key[k].name for k in keys))[:3]
        return f" (close matches: {', '.join(names)})" if names else ""


def load_catalog(extra: Path | None = None) -> Catalog:
    """The packaged catalog, extended by the GPUs (and occupancy tables) of ``extra`` when given."""
    packaged = _packaged_catalog()
    if extra is None:
        return packaged
    extra = Path(extra)
    return _build(_read_toml(extra), extra, parent=packaged)


@functools.lru_cache(maxsize=1)
def _packaged_catalog() -> Catalog:
    return _build(_read_toml(SPECS_FILE), SPECS_FILE, parent=None)


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: GPU specs file not found") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read GPU specs file ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None


def _tables(data: Mapping[str, object], key: str, path: Path) -> dict[str, dict]:
    section = data.get(key, {})
    if not isinstance(section, dict):
        raise SpecError(f"{path}: {key} must be tables like [{key}.\"NAME\"], got {type(section).__name__}")
    for name, table in section.items():
        if not isinstance(table, dict):
            raise SpecError(f"{F.where(path, key, name)} must be a table, got {table!r}")
    return section


def _build(data: Mapping[str, object], path: Path, parent: Catalog | None) -> Catalog:
    for key in data:
        if key not in ("gpus", "occupancy"):
            raise SpecError(f"{path}: unknown top-level table {key!r}{F.did_you_mean(key, ('gpus', 'occupancy'))}"
                            ' (expected [gpus."NAME"] and [occupancy."X.Y"] tables)')
    occupancy = dict(parent.occupancy) if parent else {}
    for cc, table in _tables(data, "occupancy", path).items():
        occupancy[cc] = _occupancy(cc, table, path)
    raw = _GpuTables(_tables(data, "gpus", path), path, parent, occupancy).resolve_all()
    new = _with_bases(tuple(_to_spec(name, fields, occupancy) for name, fields in raw.items()), parent)
    specs = (parent.specs if parent else ()) + new
    all_raw = {**(parent._raw if parent else {}), **raw}
    by_key, by_device = _index(specs, path, first_new=len(specs) - len(new))
    log.debug("GPU catalog %s: %d GPUs, %d compute capabilities", path, len(specs), len(occupancy))
    return Catalog(specs, occupancy, by_key, by_device, all_raw)


def _with_bases(new: tuple[GpuSpec, ...], parent: Catalog | None) -> tuple[GpuSpec, ...]:
    """``new`` with each what-if entry's ``base_spec``: its base (same file first, as _GpuTables resolves it, then the
    parent catalog) with that one's own base_spec, so a chain of what-ifs ends at a catalog GPU."""
    local = {normalize(s.name): s for s in new}
    done: dict[str, GpuSpec] = {}

    def resolved(spec: GpuSpec) -> GpuSpec:
        if spec.base is None or spec.name in done:
            return done.get(spec.name, spec)
        base = local.get(normalize(spec.base))
        base = resolved(base) if base is not None else parent.resolve(spec.base)  # type: ignore[union-attr]
        done[spec.name] = replace(spec, base_spec=base)
        return done[spec.name]

    return tuple(resolved(s) for s in new)


def _occupancy(cc: str, table: Mapping[str, object], path: Path) -> OccupancyLimits:
    at = F.where(path, "occupancy", cc)
    if not re.fullmatch(r"\d+\.\d+|gfx[0-9a-f]+", cc):
        raise SpecError(f'{at} is not a compute capability; write it as [occupancy."9.0"] (AMD: the LLVM '
                        'target, e.g. [occupancy."gfx942"])')
    F.check_keys(table, F.OCCUPANCY_KEYS, at)
    missing = [k for k in F.OCCUPANCY_KEYS if k not in table]
    if missing:
        raise SpecError(f"{at} is missing {', '.join(missing)}")
    values = {k: F.check_value(k, table[k], kind, at) for k, kind in F.OCCUPANCY_KEYS.items()}
    return OccupancyLimits(compute_capability=cc, **values)  # type: ignore[arg-type]


class _GpuTables:
    """Validate the [gpus."NAME"] tables of one file and resolve their base= chains (cycle-checked)."""

    def __init__(self, tables: Mapping[str, dict], path: Path, parent: Catalog | None,
                 occupancy: Mapping[str, OccupancyLimits]) -> None:
        self.tables, self.path, self.parent, self.occupancy = tables, path, parent, occupancy
        self.local = {normalize(n): n for n in tables}
        self.done: dict[str, dict[str, object]] = {}

    def resolve_all(self) -> dict[str, dict[str, object]]:
        for name in self.tables:
            self._resolve(name, ())
        return {name: self.done[name] for name in self.tables}

    def _resolve(self, name: str, chain: tuple[str, ...]) -> dict[str, object]:
        if name in self.done:
            return self.done[name]
        if name in chain:
            cycle = " -> ".join((*chain[chain.index(name):], name))
            raise SpecError(f"{self.path}: base cycle {cycle}; a GPU cannot inherit from itself")
        at = F.where(self.path, "gpus", name)
        table = self.tables[name]
        F.check_keys(table, F.GPU_KEYS, at)
        values = {k: F.check_value(k, v, F.GPU_KEYS[k], at) for k, v in table.items()}
        if "base" in values:
            fields = self._inherit(name, values, chain, at)
        else:
            missing = [k for k in F.REQUIRED_GPU_KEYS if k not in values]
            if missing:
                raise SpecError(f"{at} is missing {', '.join(missing)} (give them, or set base = \"NAME\" "
                                "to inherit them from a catalog GPU)")
            fields = values
        self._check_consistency(fields, at)
        self.done[name] = fields
        return fields

    def _inherit(self, name: str, values: dict[str, object], chain: tuple[str, ...], at: str) -> dict[str, object]:
        base = str(values["base"])
        local = self.local.get(normalize(base))
        if local is not None:
            base_fields: Mapping[str, object] = self._resolve(local, (*chain, name))
        elif self.parent is not None and self.parent.get(base) is not None:
            base_fields = self.parent._raw[self.parent.resolve(base).name]
        else:
            known = self.parent._suggest(base) if self.parent else ""
            raise SpecError(f"{at}.base {base!r} is not a known GPU{known}; {HINT}")
        fields = {k: v for k, v in base_fields.items() if k not in ("device_names", "aliases", "source")}
        fields.update(values)
        note = f"what-if: {', '.join(k for k in values if k != 'base') or 'no fields'} overridden by {self.path.name}"
        power = float(fields["tdp_w"]) / float(base_fields["tdp_w"])  # type: ignore[arg-type]
        if power < 1.0 and "boost_clock_mhz" not in values:
            # the boost clock, and the base clock (the guaranteed minimum under load at the stock limit, which
            # scale/rates.py's clock rule never goes below) with it, by the same law
            for clock in ("boost_clock_mhz", "base_clock_mhz"):
                if clock in base_fields and clock not in values:
                    fields[clock] = float(base_fields[clock]) * power ** (1 / 3)  # type: ignore[arg-type]
            note += f"; power limit {power:.4g}x {base}'s: clock x{power ** (1 / 3):.4g} (P ~ f^3)"
        factor = (float(fields["sms"]) / float(base_fields["sms"])  # type: ignore[arg-type]
                  * float(fields["boost_clock_mhz"]) / float(base_fields["boost_clock_mhz"]))  # type: ignore[arg-type]
        scaled = [k for k in SCALED_PEAKS if k in base_fields and k not in values]
        if factor != 1.0 and scaled:
            for k in scaled:
                fields[k] = float(base_fields[k]) * factor  # type: ignore[arg-type]
            note += f"; {', '.join(scaled)} scaled by SMs x clock ({factor:.4g}x {base})"
        for key, follows in SCALED_WITH:
            ratio = float(fields[follows]) / float(base_fields[follows])  # type: ignore[arg-type]
            if key in base_fields and key not in values and ratio != 1.0:
                fields[key] = float(base_fields[key]) * ratio  # type: ignore[arg-type]
                note += f"; {key} scaled by {follows} ({ratio:.4g}x)"
        fields["source"] = f"{values.get('source', base_fields['source'])}; {note}"
        return fields

    def _check_consistency(self, fields: Mapping[str, object], at: str) -> None:
        cc = fields["compute_capability"]
        if cc not in self.occupancy:
            raise SpecError(f"{at}.compute_capability {cc!r} has no [occupancy.\"{cc}\"] table (known: "
                            f"{', '.join(sorted(self.occupancy, key=_cc_order))});"
                            " add one to the specs file")
        given = [k for k in F.PRICE_KEYS if k in fields]
        if given and len(given) != len(F.PRICE_KEYS):
            missing = [k for k in F.PRICE_KEYS if k not in fields]
            raise SpecError(f"{at} gives {', '.join(given)} but not {', '.join(missing)}; a price needs all three")


def _cc_order(cc: str) -> tuple:
    """NVIDIA compute capabilities in numeric order, then AMD LLVM targets by name."""
    return (0, *map(int, cc.split("."))) if cc[0].isdigit() else (1, cc)


def _to_spec(name: str, fields: Mapping[str, object], occupancy: Mapping[str, OccupancyLimits]) -> GpuSpec:
    f = dict(fields)
    price = None
    if "price_usd_per_hour" in f:
        price = Price(usd_per_hour=f["price_usd_per_hour"], provider=f["price_provider"],  # type: ignore[arg-type]
                      date=f["price_date"],  # type: ignore[arg-type]
                      source=str(f.get("price_source", f"{f['price_provider']}, {f['price_date']}")))
    return GpuSpec(
        name=name, architecture=f["architecture"], compute_capability=f["compute_capability"],  # type: ignore[arg-type]
        sms=f["sms"], boost_clock_mhz=f["boost_clock_mhz"], memory_gib=f["memory_gib"],  # type: ignore[arg-type]
        memory_bandwidth_gbs=f["memory_bandwidth_gbs"], l2_cache_mib=f["l2_cache_mib"],  # type: ignore[arg-type]
        fp32_tflops=f["fp32_tflops"],  # type: ignore[arg-type]
        tensor_tflops={d: f[f"{d}_tensor_tflops"] for d in F.TENSOR_DTYPES if f"{d}_tensor_tflops" in f},  # type: ignore[misc]
        tdp_w=f["tdp_w"], interconnect=f["interconnect"], source=f["source"],  # type: ignore[arg-type]
        occupancy=occupancy[f["compute_capability"]],  # type: ignore[index]
        price=price, device_names=f.get("device_names", ()), aliases=f.get("aliases", ()),  # type: ignore[arg-type]
        base=f.get("base"),  # type: ignore[arg-type]
        extra={k: f[k] for k in F.EXTRA_GPU_KEYS if k in f},
    )


def _index(specs: tuple[GpuSpec, ...], path: Path,
           first_new: int) -> tuple[dict[str, GpuSpec], dict[str, GpuSpec]]:
    """Lookup tables by normalized name/alias/device name; two GPUs may not share a key."""
    by_key: dict[str, GpuSpec] = {}
    by_device: dict[str, GpuSpec] = {}
    for i, spec in enumerate(specs):
        labels = [("name", spec.name)] + [("alias", a) for a in spec.aliases] + \
                 [("device name", d) for d in spec.device_names]
        for what, label in labels:
            key = normalize(label)
            other = by_key.get(key)
            if other is not None and other is not spec:
                at = F.where(path, "gpus", spec.name) if i >= first_new else F.where(SPECS_FILE, "gpus", spec.name)
                raise SpecError(f"{at} {what} {label!r} is already used by {other.name!r}; pick another name "
                                "(or use base = \"...\" to derive from it)")
            by_key[key] = spec
            if what == "device name":
                by_device[key] = spec
    return by_key, by_device

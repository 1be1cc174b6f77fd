"""``write_trace``: the target trace as Kineto JSON: every original event kept, with its new times.

Times are int64 ns inside and written as µs with exactly three decimals (``orjson.Fragment``), so a
trace scaled to its own GPU re-reads to the same nanoseconds. Only events whose times changed and GPU
events (whose args gain ``habitat_origin_dur_us``, ``habitat_method`` and ``habitat_reason``) are
copied; the input's event dicts are never mutated. Kineto's per-kernel "blocks per SM", "warps per SM" and
"est. achieved occupancy %" describe the origin GPU; where a kernel has them they are recomputed for the
target (``target_occupancy_args``). The output is streamed: the top-level keys, then
the events one chunk at a time (re-parsed from the input's bytes), so the whole output never sits in
memory; the file appears atomically (temp file + rename), its bytes those of ``orjson.dumps`` of the
whole document (``render``).

Output paths (``write_pieces``): ``-`` is stdout (never gzipped); an existing character device or FIFO
(``/dev/null``, a named pipe) is opened and written like a shell redirect, never replaced; a block device or
socket is refused; a symlink is followed: the file it points to is replaced atomically and the link kept.
"""
from __future__ import annotations

import dataclasses
import os
import stat
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import orjson
import pandas as pd

import habitat_trace
from habitat_trace.timeline.replay import NO_TIME, Timeline
from habitat_trace.errors import OutputError, TraceFormatError
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.events import event_chunks
from habitat_trace.ingest.trace import gc_paused
from habitat_trace.scale import facts
from habitat_trace.scale.gpu import GpuSpec
from habitat_trace.scale.prediction import IDENTITY, Prediction

# Measured on an 11.6 MB output (gnmt): level 6 takes 0.13 s for 6.8% of the raw size;
# level 9 0.25 s for 6.2%, level 1 0.04 s for 9.7%.
GZIP_LEVEL = 6
GZIP_WBITS = 31  # zlib's gzip wrapper (header with mtime 0, CRC and size trailer)
EVENTS_MARK = b"\x00"  # stands for the event array in the dumped document: orjson escapes a NUL in strings
STDOUT = "-"  # -o -: write to stdout


def us_text(ns: int) -> bytes:
    """Integer ns as µs with exactly three decimals: 4457346609398043 -> b"4457346609398.043"."""
    q, r = divmod(abs(ns), 1000)
    return f"{'-' if ns < 0 else ''}{q}.{r:03d}".encode()


def us_fragments(ns: np.ndarray) -> list[orjson.Fragment]:
    """``us_text`` for an int64 array, as orjson Fragments (one bytes-format per number: the hot path)."""
    a = np.abs(ns)
    texts = [b"%d.%03d" % qr for qr in zip((a // 1000).tolist(), (a % 1000).tolist())]
    for i in np.flatnonzero(ns < 0).tolist():
        texts[i] = b"-" + texts[i]
    return list(map(orjson.Fragment, texts))


def is_stdout(out: Path) -> bool:
    return str(out) == STDOUT


def _special(out: Path) -> bool:
    """An existing non-regular file (symlinks followed): True for a character device or FIFO, which we
    write into; OutputError for anything else (block device, socket)."""
    try:
        mode = out.stat().st_mode
    except OSError:
        return False
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return False
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return True
    raise OutputError(f"{out}: is a block device or socket; write to a regular file, a FIFO, /dev/null or - (stdout)")


def check_output(out: Path, inputs: tuple[Path, ...]) -> None:
    """Refuse an output path that would overwrite an input or cannot be created."""
    out = Path(out)
    if is_stdout(out):
        return
    for src in inputs:
        if out.resolve() == Path(src).resolve():
            raise OutputError(f"{out}: is the input trace; choose another output path (-o)")
    if out.is_dir():
        raise OutputError(f"{out}: is a directory; give a file name (*.pt.trace.json.gz) with -o")
    if _special(out):
        return
    parent = Path(os.path.realpath(out)).parent  # an output symlink: the file it points to is replaced
    if not parent.is_dir():
        raise OutputError(f"{parent}: output directory does not exist; create it or choose another -o")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{parent}: output directory is not writable; fix its permissions or choose another -o")


def device_properties(spec: GpuSpec, base: Mapping[str, Any]) -> dict[str, Any]:
    """A deviceProperties entry describing ``spec`` (fields Kineto writes, from the catalog)."""
    occ = spec.occupancy
    major, minor = spec.compute_version
    out = dict(base)
    out.update({
        "name": spec.name, "totalGlobalMem": int(round(spec.memory_gib * 2**30)),
        "computeMajor": major, "computeMinor": minor,
        "maxThreadsPerBlock": occ.max_threads_per_block, "maxThreadsPerMultiprocessor": occ.max_threads_per_sm,
        "regsPerBlock": occ.max_registers_per_block, "warpSize": occ.warp_size, "numSms": spec.sms,
        "regsPerMultiprocessor": occ.registers_per_sm, "sharedMemPerBlockOptin": occ.shared_mem_per_block_optin_bytes,
        "sharedMemPerMultiprocessor": occ.shared_mem_per_sm_bytes,
    })
    out.setdefault("sharedMemPerBlock", 49152)  # 48 KiB static limit on every CUDA GPU
    return out


def spec_dict(spec: GpuSpec) -> dict[str, Any]:
    return orjson.loads(orjson.dumps(dataclasses.asdict(spec), default=dict))


OCCUPANCY_KEYS = ("blocks per SM", "warps per SM", "est. achieved occupancy %")


def target_occupancy_args(gpu: pd.DataFrame, target: GpuSpec) -> tuple[np.ndarray, ...]:
    """Kineto's three launch statistics for each GPU row, as they would read on ``target``: (blocks per SM,
    warps per SM, est. achieved occupancy %, mask of the rows that had them in the input).

    Kineto (libkineto CuptiActivity / output_json, kernelOccupancy in CudaDeviceProperties.cpp): blocks per
    SM = grid blocks / SMs; warps per SM = blocks per SM x threads per block / warp size; occupancy % =
    min(blocks per SM, resident blocks per SM from cuda_occupancy.h) x threads per block / max threads per SM
    x 100, written rounded to an integer (halves up). Resident blocks come from scale.occupancy with the block's shared
    memory capped at the target's opt-in limit, as the engine does (a kernel is rebuilt with tiles that fit).
    Kineto's other values have 6 decimals."""
    blocks = (gpu[S.GRID_X] * gpu[S.GRID_Y] * gpu[S.GRID_Z]).to_numpy().astype(np.float64)
    threads = (gpu[S.BLOCK_X] * gpu[S.BLOCK_Y] * gpu[S.BLOCK_Z]).to_numpy()
    had = gpu[S.CUPTI_BLOCKS_PER_SM].notna().to_numpy() & (blocks > 0) & (threads > 0)
    thr = np.where(had, threads, 1)
    lim = target.occupancy
    smem = np.minimum(gpu[S.SHARED_MEM].to_numpy(), lim.shared_mem_per_block_optin_bytes)
    # ROCm records no registers (-1): no register limit; an AMD target takes CDNA's rules (facts.blocks_per_sm_on)
    resident = facts.blocks_per_sm_on(thr, np.maximum(gpu[S.REGISTERS].to_numpy(), 0), smem, target)
    bpsm = blocks / target.sms
    wpsm = bpsm * thr / lim.warp_size
    # halves round up, as Kineto's do (12.5% is written 13; np.rint would give 12)
    occ = np.floor(100 * np.minimum(bpsm, resident) * thr / lim.max_threads_per_sm + 0.5)
    return np.round(bpsm, 6), np.round(wpsm, 6), occ.astype(np.int64), had


@dataclass(frozen=True)
class _Rewrite:
    """What changes in the events: new times (by event index) and the GPU events' args."""

    ts: np.ndarray
    dur: np.ndarray
    rows: np.ndarray  # sorted indices of the events written with new times
    gpu_ev: np.ndarray  # sorted event index of each trace.gpu row
    old_dur: np.ndarray  # per GPU row, ns
    method: np.ndarray
    reason: np.ndarray
    occupancy: tuple[np.ndarray, ...] | None  # target_occupancy_args; None when the target is the origin

    @classmethod
    def of(cls, trace: Any, timeline: Timeline, prediction: Prediction) -> "_Rewrite":
        ts = timeline.ts_ns
        gpu_ev = trace.gpu[S.EVENT].to_numpy()
        rewrite = np.zeros(len(ts), dtype=bool)  # a mask, not np.union1d: 1.7 s on 1.1M events (numpy 2.4)
        # against the times written in the raw events: those of a scaled trace's tables (API) are not
        raw_ts, raw_dur = trace.raw_times()
        rewrite[(ts != raw_ts) | (timeline.dur_ns != raw_dur)] = True
        rewrite[gpu_ev] = True
        rows = np.flatnonzero(rewrite & (ts != NO_TIME))
        same = bool((np.asarray(prediction.method) == IDENTITY).all())
        occ = None if same else target_occupancy_args(trace.gpu, prediction.target)
        return cls(ts, timeline.dur_ns, rows, gpu_ev, trace.gpu[S.DUR].to_numpy(),
                   np.asarray(prediction.method), np.asarray(prediction.reason), occ)

    def apply(self, events: list[Any], first: int) -> list[Any]:
        """Events ``first`` .. ``first + len(events) - 1`` as written (``events`` is the caller's own
        list; the dicts in it are copied before they change, never mutated)."""
        lo, hi = np.searchsorted(self.rows, [first, first + len(events)])
        rows = self.rows[lo:hi]
        ts_f = us_fragments(self.ts[rows])
        dur = self.dur[rows]
        has_dur = dur != NO_TIME
        dur_f: list[Any] = [None] * len(rows)
        for j, frag in zip(np.flatnonzero(has_dur).tolist(), us_fragments(dur[has_dur])):
            dur_f[j] = frag
        for i, t, d in zip((rows - first).tolist(), ts_f, dur_f):
            e = dict(events[i])
            e["ts"] = t
            if d is not None:
                e["dur"] = d
            events[i] = e
        lo, hi = np.searchsorted(self.gpu_ev, [first, first + len(events)])
        occ = [a[lo:hi].tolist() for a in self.occupancy] if self.occupancy is not None else None
        for j, (i, od, m, why) in enumerate(zip((self.gpu_ev[lo:hi] - first).tolist(),
                                                us_fragments(self.old_dur[lo:hi]), self.method[lo:hi].tolist(),
                                                self.reason[lo:hi].tolist())):
            e = events[i]
            args = dict(e["args"]) if isinstance(e.get("args"), dict) else {}
            if occ is not None and occ[3][j]:
                for key, values in zip(OCCUPANCY_KEYS, occ):
                    if key in args:
                        args[key] = values[j]
            args["habitat_origin_dur_us"] = od
            args["habitat_method"] = str(m)
            if why:
                args["habitat_reason"] = str(why)
            else:  # the input may be a trace we wrote: its reason is not this prediction's
                args.pop("habitat_reason", None)
            e["args"] = args
        return events


def _method_counts(prediction: Prediction) -> dict[str, int]:
    counts = pd.Series(prediction.method, dtype=object).value_counts(sort=False)  # np.unique on objects is slow
    return {str(k): int(v) for k, v in sorted(counts.items())}


def target_devices(trace: Any, target: GpuSpec) -> list[dict[str, Any]]:
    """The output's deviceProperties: each of the trace's devices described as ``target``."""
    devices = trace.devices or [{"id": int(trace.gpu[S.DEVICE].mode().iloc[0]) if len(trace.gpu) else 0}]
    return [device_properties(target, d) for d in devices]


def habitat_block(prediction: Prediction, spec_info: Mapping[str, Any]) -> dict[str, Any]:
    """The output's top-level ``habitat_trace`` record: what was predicted, from what, and how."""
    return {
        "version": habitat_trace.__version__,
        "origin": prediction.origin.name, "target": prediction.target.name,
        "spec": spec_dict(prediction.target), "methods": _method_counts(prediction),
        "warnings": list(prediction.warnings), **dict(spec_info),
    }


def pieces(trace: Any, timeline: Timeline, prediction: Prediction,
           spec_info: Mapping[str, Any]) -> Iterator[bytes | memoryview]:
    """The output document's JSON bytes, in pieces: the top-level keys around the event array, and the
    events one chunk at a time (parsed again from the input for the lazy ``Events``). Joined, the same
    bytes as ``orjson.dumps`` of the whole document."""
    doc: dict[str, Any] = dict(trace.meta)
    doc["deviceProperties"] = target_devices(trace, prediction.target)
    doc["traceEvents"] = orjson.Fragment(EVENTS_MARK)
    doc["habitat_trace"] = habitat_block(prediction, spec_info)
    head, tail = _dumps(doc, trace.path, "the top-level keys").split(EVENTS_MARK)
    rewrite = _Rewrite.of(trace, timeline, prediction)
    yield head + b"["
    sep = b""
    for first, events in event_chunks(trace.events):
        dumped = _dumps(rewrite.apply(events, first), trace.path, f"events #{first}-#{first + len(events) - 1}")
        del events
        if len(dumped) > 2:
            yield sep
            yield memoryview(dumped)[1:-1]  # the chunk without its list's brackets
            sep = b","
    yield b"]" + tail


def _dumps(value: Any, path: Path, what: str) -> bytes:
    """orjson.dumps, with a one-line error for what no JSON writer of ours can write (an integer beyond 64 bits:
    the input was read by the whole-document parser, which accepts it)."""
    try:
        return orjson.dumps(value)
    except TypeError as exc:
        raise TraceFormatError(f"{path}: {what} hold a value that cannot be written back ({exc}); Kineto writes no "
                               "integer beyond 64 bits: fix or drop it, or export the trace again") from None


def render(trace: Any, timeline: Timeline, prediction: Prediction, spec_info: Mapping[str, Any]) -> bytes:
    """The output document's JSON bytes."""
    return b"".join(pieces(trace, timeline, prediction, spec_info))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_trace(trace: Any, timeline: Timeline, prediction: Prediction, out: Path,
                spec_info: Mapping[str, Any]) -> Path:
    """Write the target trace to ``out`` (gzip when it ends with .gz), streamed one chunk of events at a
    time; returns ``out``."""
    out = Path(out)
    check_output(out, (trace.path,))
    with gc_paused():  # the chunks' dicts are freed by reference counting; see ingest.trace.gc_paused
        return write_pieces(pieces(trace, timeline, prediction, spec_info), out)


def write_bytes(data: bytes, out: Path, gzipped: bool = False) -> Path:
    """Write JSON bytes to ``out`` atomically (gzip when it ends with .gz, unless ``data`` already is
    gzip); returns ``out``."""
    return write_pieces(iter([data]), out, gzipped)


def write_pieces(data: Iterable[bytes | memoryview], out: Path, gzipped: bool = False) -> Path:
    """Write the concatenated ``data`` to ``out`` (gzip when ``out`` ends with .gz, unless ``data`` already
    is gzip). A regular file appears atomically: a temp file beside it, renamed when complete, removed on any
    error or signal that unwinds (Ctrl-C; the CLI turns SIGTERM into SystemExit). ``-`` is stdout; an existing
    character device or FIFO is written in place; a symlink's target is replaced (module docstring)."""
    out = Path(out)
    gz = out.name.endswith(".gz") and not gzipped
    if is_stdout(out):
        _copy(data, sys.stdout.buffer, False)
        sys.stdout.buffer.flush()
        return out
    if _special(out):
        try:
            with open(out, "wb") as fh:
                _copy(data, fh, gz)
        except OSError as exc:
            raise OutputError(f"{out}: cannot write ({exc.strerror}); choose another -o") from None
        return out
    target = Path(os.path.realpath(out))
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"{out}: cannot write in {target.parent} ({exc.strerror}); "
                          "check the directory's permissions or choose another -o") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            _copy(data, fh, gz)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; the output is an ordinary file
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"{out}: cannot write ({exc.strerror}); check the directory's permissions") from None
        raise
    return out


def _copy(data: Iterable[bytes | memoryview], fh: Any, gz: bool) -> None:
    if gz:
        # the stream gzip.compress(data, GZIP_LEVEL, mtime=0) makes in one piece: same bytes
        comp = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, GZIP_WBITS)
        for piece in data:
            fh.write(comp.compress(piece))
        fh.write(comp.flush())
    else:
        for piece in data:
            fh.write(piece)

"""``write_trace(document, out)``: serialize a target trace (pipeline.document.TargetDocument) as Kineto JSON.

Emit decides nothing: which events change, to what, and what the header says come with the document. Times are
int64 ns inside and written as µs with exactly three decimals (``orjson.Fragment``), so a trace scaled to its own
GPU re-reads to the same nanoseconds. Only events whose times changed and GPU events (whose args gain
``habitat_origin_dur_us``, ``habitat_method`` and ``habitat_reason``) change: copied where the input's event dicts are
shared (a small trace's, kept parsed), changed in place where they were parsed for this write alone. The output is streamed: the top-level keys, then the events one chunk at a time (re-parsed from the
input's bytes), so the whole output never sits in memory; the file appears atomically (temp file + rename), its
bytes those of ``orjson.dumps`` of the whole document.

Output paths (``write_pieces``): ``-`` is stdout (never gzipped); an existing character device or FIFO
(``/dev/null``, a named pipe) is opened and written like a shell redirect, never replaced; a block device or
socket is refused; a symlink is followed: the file it points to is replaced atomically and the link kept.
"""
from __future__ import annotations

import gzip
import os
import secrets
import stat
import sys
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import orjson

from habitat_trace.errors import OutputError, TraceFormatError
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.ingest.events import event_chunks, fresh_dicts
from habitat_trace.ingest.reader import GZIP_MAGIC
from habitat_trace.ingest.trace import gc_paused
from habitat_trace.pipeline.document import OCCUPANCY_KEYS, Rewrite, TargetDocument

# Measured on an 11.6 MB output (gnmt): level 6 takes 0.13 s for 6.8% of the raw size;
# level 9 0.25 s for 6.2%, level 1 0.04 s for 9.7%.
GZIP_LEVEL = 6
GZIP_WBITS = 31  # zlib's gzip wrapper (header with mtime 0, CRC and size trailer)
EVENTS_MARK = b"\x00"  # stands for the event array in the dumped document: orjson escapes a NUL in strings
STDOUT = "-"  # -o -: write to stdout
# The writer's chunks of a large trace: 2 MiB of JSON, ~10 MB while parsed and rewritten (ingest's 8 MiB: 40 MB more
# at the peak, which is the write's: the tables and replays are alive then), for no measurable time.
WRITE_CHUNK_BYTES = 1 << 21


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


def apply(rewrite: Rewrite, events: list[Any], first: int, copy: bool = True) -> list[Any]:
    """Events ``first`` .. ``first + len(events) - 1`` as written (``events`` is the caller's own list; with ``copy``
    the dicts in it are copied before they change, never mutated; without, they are the caller's to change)."""
    _retime(rewrite, events, first, copy)
    _annotate(rewrite, events, first, copy)
    return events


def _retime(r: Rewrite, events: list[Any], first: int, copy: bool) -> None:
    lo, hi = np.searchsorted(r.rows, [first, first + len(events)])
    rows = r.rows[lo:hi]
    ts_f = us_fragments(r.ts[rows])
    dur = r.dur[rows]
    has_dur = dur != NO_TIME
    dur_f: list[Any] = [None] * len(rows)
    for j, frag in zip(np.flatnonzero(has_dur).tolist(), us_fragments(dur[has_dur])):
        dur_f[j] = frag
    for i, t, d in zip((rows - first).tolist(), ts_f, dur_f):
        e = dict(events[i]) if copy else events[i]
        e["ts"] = t
        if d is not None:
            e["dur"] = d
        events[i] = e


def _annotate(r: Rewrite, events: list[Any], first: int, copy: bool) -> None:
    """The GPU events' args: the origin's duration, the method and reason, the target's occupancy statistics (the
    events themselves are _retime's: copied there when ``copy``)."""
    lo, hi = np.searchsorted(r.gpu_ev, [first, first + len(events)])
    occ = [a[lo:hi].tolist() for a in r.occupancy] if r.occupancy is not None else None
    for j, (i, od, m, why) in enumerate(zip((r.gpu_ev[lo:hi] - first).tolist(), us_fragments(r.old_dur[lo:hi]),
                                            r.method[lo:hi].tolist(), r.reason[lo:hi].tolist())):
        e = events[i]
        a = e.get("args")
        args = (dict(a) if copy else a) if isinstance(a, dict) else {}
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


def pieces(document: TargetDocument) -> Iterator[bytes | memoryview]:
    """The output document's JSON bytes, in pieces: the top-level keys around the event array, and the
    events one chunk at a time (parsed again from the input for the lazy ``Events``). Joined, the same
    bytes as ``orjson.dumps`` of the whole document."""
    doc = dict(document.meta)
    doc["traceEvents"] = orjson.Fragment(EVENTS_MARK)
    head, tail = _dumps(doc, document.source, "the top-level keys").split(EVENTS_MARK)
    yield head + b"["
    sep = b""
    copy = not fresh_dicts(document.events)  # a large trace's chunks are parsed for this write alone
    for first, events in event_chunks(document.events, WRITE_CHUNK_BYTES):
        dumped = _dumps(apply(document.rewrite, events, first, copy), document.source,
                        f"events #{first}-#{first + len(events) - 1}")
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_trace(document: TargetDocument, out: Path) -> Path:
    """Write the target trace to ``out`` (gzip when it ends with .gz), streamed one chunk of events at a
    time; returns ``out``."""
    out = Path(out)
    check_output(out, (document.source,))
    with gc_paused():  # the chunks' dicts are freed by reference counting; see ingest.trace.gc_paused
        return write_pieces(pieces(document), out)


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
    # The temporary file's name is chosen before the file exists (O_EXCL), so the clean-up below knows it wherever a
    # signal lands: with mkstemp, a Ctrl-C between the file's creation and this try left it behind (issue 33, item 10)
    tmp = str(target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        except OSError as exc:
            if isinstance(exc, FileExistsError):
                tmp = ""  # another writer's: not ours to remove
            raise OutputError(f"{out}: cannot write in {target.parent} ({exc.strerror}); "
                              "check the directory's permissions or choose another -o") from None
        with os.fdopen(fd, "wb") as fh:
            _copy(data, fh, gz)
        os.chmod(tmp, 0o666 & ~_umask())  # made 0600 like mkstemp's; the output is an ordinary file
        os.replace(tmp, target)
    except BaseException as exc:
        if tmp:
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


def copy_trace(src: Path, out: Path) -> Path:
    """Write the file ``src`` to ``out`` unchanged, (de)compressing only when the suffixes differ."""
    check_output(out, (src,))
    raw = Path(src).read_bytes()
    gzipped = raw[:2] == GZIP_MAGIC
    if gzipped and not out.name.endswith(".gz"):
        raw, gzipped = gzip.decompress(raw), False
    return write_bytes(raw, out, gzipped=gzipped)

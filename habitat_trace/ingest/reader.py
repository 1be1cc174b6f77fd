"""Read a Chrome-trace JSON file (plain or gzip) into its top-level dict, or fail with one clear line.

Contract: ``read_document`` returns a dict with a ``traceEvents`` list; raises TraceFormatError naming the
file and the fix. ``split_document`` is the low-memory way in: the top-level keys parsed, the events left
as bytes (``Events``); it returns None for anything it does not recognize as a well-formed Chrome trace,
and the caller then goes through ``parse_document``, which raises the right error (or parses what only
Python's json module accepts, NaN and Infinity).
"""
from __future__ import annotations

import gzip
import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any

import orjson

from habitat_trace.errors import TraceFormatError
from habitat_trace.ingest import scan
from habitat_trace.ingest.events import ChunkError, Events, FileStamp

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_EVENTS = 1000  # a trace has duration/metadata events among its first ones
HOW_TO_RECORD = "record one with torch.profiler (export_chrome_trace or tensorboard_trace_handler)"


def read_bytes(path: Path) -> bytes:
    """The file's JSON bytes, gunzipped when the content is gzip (whatever the suffix says)."""
    return read_stamped(path)[0]


def read_stamped(path: Path) -> tuple[bytes, FileStamp | None]:
    """``read_bytes``, and the file's stamp when the bytes are the file's own (a plain regular file that did not
    change while it was read), so that they can be read again from it (Events.release); else None."""
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file; pass the path of a torch.profiler trace (.json or .json.gz)")
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a directory; pass a trace file inside it (*.pt.trace.json[.gz])")
    try:
        with open(path, "rb") as f:
            before = os.fstat(f.fileno())
            raw = f.read()
            after = os.fstat(f.fileno())
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror}); check the path and its permissions") from None
    if not raw:
        raise TraceFormatError(f"{path}: file is empty; {HOW_TO_RECORD}")
    if raw[:2] == GZIP_MAGIC:
        try:
            return gzip.decompress(raw), None
        except (EOFError, OSError, zlib.error):
            raise TraceFormatError(
                f"{path}: gzip data is truncated or corrupt; re-copy the file or export the trace again"
            ) from None
    same = stat.S_ISREG(after.st_mode) and FileStamp.of(before) == FileStamp.of(after) == FileStamp(len(raw),
                                                                                                 after.st_mtime_ns)
    return raw, FileStamp.of(after) if same else None


def read_document(path: Path) -> dict[str, Any]:
    """Parse the trace into its top-level object; check it looks like a Chrome trace."""
    return parse_document(path, read_bytes(path))


def read_meta(path: Path) -> dict[str, Any]:
    """The top-level keys but ``traceEvents``, the events scanned but not parsed (what a directory's traces are
    grouped into runs by: their ``distributedInfo``)."""
    raw = read_bytes(path)
    split = split_document(raw)
    if split is not None:
        return split[0]
    return {k: v for k, v in parse_document(path, raw).items() if k != "traceEvents"}


def split_document(raw: bytes) -> tuple[dict[str, Any], Events] | None:
    """The top-level keys but ``traceEvents`` (``{}`` for a bare array), and the events unparsed; None
    when ``raw`` is not a well-formed trace with events (``parse_document`` then says what is wrong)."""
    layout = scan.scan(raw)
    if layout is None or not len(layout.starts):
        return None
    try:
        head = orjson.loads(layout.meta_bytes(raw))
    except orjson.JSONDecodeError:
        return None
    if isinstance(head, dict) and head.get("traceEvents") == []:
        meta = {k: v for k, v in head.items() if k != "traceEvents"}
    elif head == []:
        meta = {}
    else:
        return None
    events = Events(raw, layout.starts, layout.ends)
    try:
        if not _has_events(events[:SNIFF_EVENTS]):
            return None
    except ChunkError:
        return None
    return meta, events


def _has_events(first: list[Any]) -> bool:
    return any(type(e) is dict and "ph" in e for e in first)


def parse_document(path: Path, raw: bytes) -> dict[str, Any]:
    """``read_document`` on bytes already read."""
    doc = _parse(path, raw)
    if isinstance(doc, list):  # the Chrome trace format also allows a bare event array
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        kind = type(doc).__name__
        raise TraceFormatError(
            f"{path}: valid JSON ({kind}) but not a Chrome trace (no 'traceEvents' list); {HOW_TO_RECORD}"
        )
    if not _has_events(doc["traceEvents"][:SNIFF_EVENTS]):
        what = "is empty" if not doc["traceEvents"] else "holds no trace events (objects with a 'ph' field)"
        raise TraceFormatError(f"{path}: 'traceEvents' {what}; {HOW_TO_RECORD}")
    return doc


def _parse(path: Path, raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if raw[exc.pos:exc.pos + 4].lstrip(b"-")[:3] in (b"NaN", b"Inf"):
            # Python's json module writes NaN/Infinity; accept them here so the event check names the event
            try:
                return json.loads(raw)
            except ValueError:
                pass
        what = ("truncated" if _looks_truncated(raw)
                else "binary data, not JSON" if b"\x00" in raw[:1024] else "not valid JSON")
        raise TraceFormatError(
            f"{path}: {what} ({exc.msg} at byte {exc.pos}); export the trace again, {HOW_TO_RECORD}"
        ) from None


def _looks_truncated(raw: bytes) -> bool:
    """Starts like a JSON document but does not end like one (a copy or export cut short)."""
    text = raw.strip()
    return text[:1] in (b"{", b"[") and text[-1:] not in (b"}", b"]")

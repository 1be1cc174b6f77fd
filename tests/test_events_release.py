"""A plain trace file's event bytes are dropped once ingest has parsed them and read again from the file when asked
(Events.release, issue 34: 1x the file less peak memory); a file that changed meanwhile is refused, not misread."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import orjson
import pytest

from habitat_trace.errors import TraceFormatError
from habitat_trace.ingest import events as events_module
from habitat_trace.ingest import load
from habitat_trace.timeline.overhead import python_event_count
from tests.conftest import MLP_FIXTURE


def _plain(tmp_path: Path) -> Path:
    out = tmp_path / "mlp.pt.trace.json"
    out.write_bytes(gzip.decompress(MLP_FIXTURE.read_bytes()))
    return out


def test_released_events_read_the_file_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_module, "KEEP_PARSED_BYTES", 0)  # as a large trace: nothing kept parsed
    path = _plain(tmp_path)
    t = load(path)
    assert "in " in repr(t.events)  # released: no bytes held
    want = orjson.loads(path.read_bytes())["traceEvents"]
    assert list(t.events) == want and t.events[7] == want[7] and t.events[3:9] == want[3:9]
    raw = path.read_bytes()
    # counted while ingest held the bytes: the file is not read again for it
    monkeypatch.setattr(events_module.Events, "_count_in_file", lambda self, token: pytest.fail("read again"))
    assert python_event_count(t.events) == raw.count(b'"python_function"')


def test_a_gzip_trace_keeps_its_bytes() -> None:
    t = load(MLP_FIXTURE)
    assert "bytes" in repr(t.events)


def test_a_file_changed_after_loading_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_module, "KEEP_PARSED_BYTES", 0)
    path = _plain(tmp_path)
    t = load(path)
    path.write_bytes(path.read_bytes() + b" ")
    with pytest.raises(TraceFormatError, match=f"{path.name}: the file changed"):
        t.events[0]
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same size, touched
    with pytest.raises(TraceFormatError, match="changed"):
        list(t.events)


def test_a_small_document_is_parsed_once_and_never_changed_by_a_write(tmp_path: Path) -> None:
    """Its parsed events are shared by every read (events.KEEP_PARSED_BYTES): writing outputs must not change them."""
    from habitat_trace.pipeline import Options, Run
    from habitat_trace.pipeline.document import target_document
    from habitat_trace.emit.writer import write_trace

    path = _plain(tmp_path)
    want = orjson.loads(path.read_bytes())["traceEvents"]
    options = Options.of()
    run = Run.open([path], options)
    events = run.ranks[0].tables.events
    assert events._kept is not None  # ingest read it in full
    first = list(events.chunks())[0][1]
    first.clear()  # a caller may change the lists it gets
    outputs = []
    a100, t4 = options.targets("A100,T4")
    for k, target in enumerate((a100, t4, a100)):
        rr = run.replay(target).ranks[0]
        outputs.append(write_trace(target_document(rr), tmp_path / f"out{k}.json").read_bytes())
    assert list(events) == want and events[11] == want[11]
    assert outputs[0] == outputs[2] != outputs[1]

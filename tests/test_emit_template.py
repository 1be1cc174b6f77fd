"""A kept document written again comes from emit.writer's template (issue 34: scale --to all), and its bytes are those
of the plain write, on every catalog target of real traces; the write behind (a trace compressed and written on a
thread while the next target is predicted) lands whole or not at all."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.emit import writer
from habitat_trace.errors import OutputError
from habitat_trace.ingest import load
from habitat_trace.ingest.columns import NO_TIME
from habitat_trace.pipeline import Options, Run
from habitat_trace.pipeline.document import TargetDocument, target_document
from habitat_trace.scale.specs import load_catalog
from tests.conftest import DATA, MLP_FIXTURE

CATALOG = load_catalog(None)
TARGETS = [s for s in CATALOG.specs if s.base is None]


def _plain(document: TargetDocument, monkeypatch: pytest.MonkeyPatch) -> bytes:
    with monkeypatch.context() as m:
        m.setattr(writer, "_templated", lambda doc: None)
        return b"".join(bytes(p) for p in writer.pieces(document))


def _written(document: TargetDocument) -> bytes:
    return b"".join(bytes(p) for p in writer.pieces(document))


def _template(run: Run) -> Any:
    return run.ranks[0].tables.events.derived.get(writer.TEMPLATE_KEY)


@pytest.mark.parametrize("name, stride", [(MLP_FIXTURE.name, 1), ("a100_nccl_step5.json.gz", 4),
                                          ("amd_mi250_minitoy_rocm6.json.gz", 4),
                                          ("h200_neusight_bert_large-inf-512-8.pt.trace.json.gz", 6)])
def test_every_target_written_from_the_template_is_the_plain_write(name: str, stride: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run.open([DATA / name], Options(CATALOG))
    base = run.baseline().ranks[0]
    first = _written(target_document(base))  # the first write: plain, and the template is made at the next
    assert first == _plain(target_document(base), monkeypatch)
    assert _template(run) is None
    for target in TARGETS[::stride]:
        doc = target_document(run.replay(target).ranks[0])
        assert _written(doc) == _plain(doc, monkeypatch), target.name
    assert _template(run), "the template was never used: the test compared the plain write with itself"


def test_a_trace_we_wrote_is_written_the_plain_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its GPU args already hold habitat_method and the rest, which a write changes in place: no template."""
    options = Options(CATALOG)
    ours = tmp_path / "a100.pt.trace.json.gz"
    writer.write_trace(target_document(Run.open([MLP_FIXTURE], options).replay(TARGETS[0]).ranks[0]), ours)
    run = Run.open([ours], options)
    docs = [target_document(run.replay(t).ranks[0]) for t in TARGETS[:3]]
    assert [_written(d) for d in docs] == [_plain(d, monkeypatch) for d in docs]
    assert _template(run) is False


def test_a_rewrite_of_other_gpu_rows_or_origin_durations_is_not_templated(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run.open([MLP_FIXTURE], Options(CATALOG))
    docs = [target_document(run.replay(t).ranks[0]) for t in TARGETS[:2]]
    _written(docs[0]), _written(docs[1])
    template = _template(run)
    r = docs[1].rewrite
    assert writer._fill(template, r) is not None
    assert writer._fill(template, replace(r, old_dur=r.old_dur + 1)) is None
    assert writer._fill(template, replace(r, gpu_ev=r.gpu_ev[:-1], old_dur=r.old_dur[:-1])) is None


_RUN = Run.open([MLP_FIXTURE], Options(CATALOG))
_DOC = target_document(_RUN.replay(TARGETS[0]).ranks[0])


@given(st.integers(-10**6, 10**6), st.integers(0, 10**6), st.booleans(), st.integers(0, 2**32 - 1))
def test_template_writes_any_times_as_the_plain_write(shift: int, scale_ppm: int, drop_durs: bool, seed: int) -> None:
    """Times of any sign and size (µs with three decimals), durations dropped (NO_TIME: the key left as read), any
    mix of rows rewritten: the template's bytes are the plain write's."""
    r = _DOC.rewrite
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(r.ts), size=min(len(r.ts), len(r.rows)), replace=False))
    rows = np.union1d(rows[r.ts[rows] != NO_TIME], r.rows)  # GPU rows are always among them, as Rewrite.of makes
    ts = r.ts.copy()
    ts[rows] = (ts[rows] * (1 + scale_ppm * 1e-6)).astype(np.int64) + shift
    dur = r.dur.copy()
    if drop_durs:
        dur[rows[rng.random(len(rows)) < 0.2]] = NO_TIME
    doc = replace(_DOC, rewrite=replace(r, ts=ts, dur=dur, rows=rows))
    _written(_DOC), _written(_DOC)  # the template exists
    templated = writer._templated(doc)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(writer, "_templated", lambda d: None)
        plain = b"".join(bytes(p) for p in writer.pieces(doc))
    assert templated is not None
    head, tail = plain.split(b'"traceEvents":[', 1)
    assert tail.startswith(templated) and tail[len(templated):len(templated) + 1] == b"]"


# --- the write behind -------------------------------------------------------------------------------------------

def _doc(target: int = 1) -> TargetDocument:
    return target_document(_RUN.replay(TARGETS[target]).ranks[0])


def test_writes_behind_are_the_writes_in_place(tmp_path: Path) -> None:
    behind, done = writer.WriteBehind(), []
    for k in range(3):
        behind.submit(_doc(k), tmp_path / f"b{k}.pt.trace.json.gz", done.append)
    behind.drain()
    assert done == [tmp_path / f"b{k}.pt.trace.json.gz" for k in range(3)]
    for k in range(3):
        inplace = writer.write_trace(_doc(k), tmp_path / f"p{k}.pt.trace.json.gz")
        assert inplace.read_bytes() == done[k].read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))


def _held_copy(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """writer._copy held back: (set once a write is compressing, set to let it go on)."""
    copying, go = threading.Event(), threading.Event()
    real_copy = writer._copy

    def held(data: Any, fh: Any, gz: bool) -> None:
        copying.set()
        go.wait(10)
        real_copy(data, fh, gz)

    monkeypatch.setattr(writer, "_copy", held)
    return copying, go


def test_an_aborted_write_behind_never_lands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped before its rename: no output, no temporary file; renamed before the abort: reported as written."""
    real_copy = writer._copy
    copying, go = _held_copy(monkeypatch)
    behind, done = writer.WriteBehind(), []
    out = tmp_path / "late.pt.trace.json.gz"
    behind.submit(_doc(), out, done.append)
    assert copying.wait(10)
    behind._gate.stop()  # the signal arrives while the trace is compressed
    go.set()
    assert behind.abort() is None and not done
    assert not out.exists() and not list(tmp_path.glob(".*"))

    monkeypatch.setattr(writer, "_copy", real_copy)
    behind = writer.WriteBehind()
    behind.submit(_doc(), out, done.append)
    behind._finished.wait(10)  # renamed into place before the signal
    landed = behind.abort()
    assert landed is not None and landed[0] == out and out.exists()


def test_a_failed_write_behind_raises_at_the_next_submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(data: Any, fh: Any, gz: bool) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer, "_copy", full)
    behind = writer.WriteBehind()
    behind.submit(_doc(), tmp_path / "a.pt.trace.json.gz", lambda p: None)
    with pytest.raises(OutputError, match="No space left on device"):
        behind.submit(_doc(2), tmp_path / "b.pt.trace.json.gz", lambda p: None)
    assert not list(tmp_path.iterdir())


def test_a_large_document_or_stdout_is_written_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from habitat_trace.ingest import events as events_module

    assert writer.WriteBehind.behind(_doc(), tmp_path / "x.json")
    assert not writer.WriteBehind.behind(_doc(), Path("-"))
    assert not writer.WriteBehind(enabled=False).enabled
    monkeypatch.setattr(events_module, "KEEP_PARSED_BYTES", 0)  # as a large trace: its chunks parsed per write
    doc = target_document(Run([load(MLP_FIXTURE)], Options(CATALOG)).replay(TARGETS[1]).ranks[0])
    assert not writer.WriteBehind.behind(doc, tmp_path / "x.json")


def test_a_signal_while_a_write_behind_runs_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C lands while scale waits for the trace compressed behind it: no output, no temporary file, no row (a
    signal interrupting Thread.join marks the thread stopped while it runs, CPython 3.11; the writer waits on its
    own Event)."""
    import signal

    from habitat_trace.commands.batch import Unit, scale_unit

    compressing, release = _held_copy(monkeypatch)

    def ctrl_c() -> None:
        if compressing.wait(30):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # waiting in WriteBehind.drain
            threading.Timer(0.3, release.set).start()

    out = tmp_path / "mlp.a100.pt.trace.json.gz"
    threading.Thread(target=ctrl_c, daemon=True).start()
    result = scale_unit(Unit((MLP_FIXTURE,), (TARGETS[0],)), Options(CATALOG), {(MLP_FIXTURE, TARGETS[0].name): out},
                        spare_cpu=True)
    assert result.interrupted == "SIGINT" and result.rows == []
    assert list(tmp_path.iterdir()) == []


def test_a_signal_while_a_landed_write_is_recorded_leaves_it_to_abort(tmp_path: Path) -> None:
    """Regression (tests/test_issue26.py item 3 failed once in CI, 2026-12-06: "wrote 2 traces before the signal" with
    three in place): drain forgot a landed write before running its ``done``, so a Ctrl-C in between lost its record.
    Now the write stays pending until ``done`` has run, and abort hands it back (``done`` may run twice: the caller's
    is idempotent)."""
    behind = writer.WriteBehind()
    out = tmp_path / "landed.pt.trace.json.gz"

    def interrupted(path: Path) -> None:
        raise KeyboardInterrupt  # the signal lands as the record is made

    behind.submit(_doc(), out, interrupted)
    with pytest.raises(KeyboardInterrupt):
        behind.drain()
    landed = behind.abort()
    assert landed is not None and landed[0] == out and out.exists()


def test_an_interrupt_as_the_write_thread_starts_leaves_nothing_to_wait_for(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (test_issue26.py's item 3 [terminal-1] hung for its 120 s, once in ~100 runs on a loaded machine,
    2026-12-06): a Ctrl-C between the write thread's creation and its start left ``abort`` waiting for a thread that
    never ran. Now the thread starts under interrupts.held(): the KeyboardInterrupt comes out of ``submit`` once the
    thread runs, and ``abort`` returns (the write never lands)."""
    import signal

    start = threading.Thread.start

    def interrupted_start(self: threading.Thread) -> None:
        if self.name == "habitat-write":
            signal.raise_signal(signal.SIGINT)  # Ctrl-C lands here ...
            time.sleep(0.05)  # ... and its handler runs at the next bytecode unless it is held
        start(self)

    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    behind, done = writer.WriteBehind(), []
    out = tmp_path / "never.pt.trace.json.gz"
    try:
        with pytest.raises(KeyboardInterrupt):
            behind.submit(_doc(), out, done.append)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert behind._thread is not None and behind._thread.ident is not None, "the write thread never started"
    landed: list[Any] = []
    waiter = threading.Thread(target=lambda: landed.append(behind.abort()), daemon=True)
    waiter.start()
    waiter.join(20)
    assert not waiter.is_alive(), "abort waits for a write thread that never ran"
    assert out.exists() == (landed[0] is not None) and not done  # landed before the abort, or never
    assert not list(tmp_path.glob(".*.tmp"))

"""`scale DIR --jobs N`: a directory of traces scaled in a process pool, memory-bounded, one summary."""
from __future__ import annotations

import gzip
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from habitat_trace.cli import main
from habitat_trace.pipeline.jobs import PEAK_PER_BYTE, plan_jobs, uncompressed_size
from tests.dist_helpers import ddp_trace, write


def test_uncompressed_size_reads_the_gzip_footer(tmp_path: Path) -> None:
    raw = json.dumps(ddp_trace()).encode()
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(raw))
    plain = tmp_path / "t.json"
    plain.write_bytes(raw)
    assert uncompressed_size(gz) == len(raw) == uncompressed_size(plain)


def test_jobs_capped_by_memory(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_bytes(b"x" * 1_000_000)
    sizes = [uncompressed_size(f)] * 8
    n, note = plan_jobs(sizes, 8, 8, memory=int(2.5 * PEAK_PER_BYTE * 1_000_000))
    assert n == min(2, os.cpu_count() or 1) and ("capped to 2" in note or n == 1)
    assert plan_jobs(sizes, 1, 8, memory=10**12) == (1, "")
    n, _ = plan_jobs(sizes, 8, 8, memory=1)  # never below one worker
    assert n == 1
    assert plan_jobs(sizes, 8, 1, memory=10**12)[0] == 1  # never more workers than work


@pytest.mark.slow
def test_scale_dir_in_parallel_with_one_summary(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    d, out = tmp_path / "ranks", tmp_path / "out"
    d.mkdir()
    out.mkdir()
    for r in range(3):
        write(ddp_trace(rank=r, world=3, gemm_us=500 + 100 * r), d / f"rank{r}.pt.trace.json.gz")
    main(["scale", str(d), "--to", "A100,L4", "-o", str(out), "--jobs", "2"])
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["outputs"]
    assert sorted((r["target"], r["rank"]) for r in rows) == [(t, r) for t in ("A100 SXM4 80GB", "L4") for r in range(3)]
    assert all(r["methods"].get("collective") == 2 for r in rows)
    assert len(summary["slowest"]) == 2
    assert sorted(p.name for p in out.glob("*.pt.trace.json.gz")) == sorted(
        f"rank{r}.{gpu}.pt.trace.json.gz" for r in range(3) for gpu in ("a100-sxm4-80gb", "l4"))
    assert "the slowest trace per target" in capsys.readouterr().out


def test_a_bad_trace_is_a_row_and_a_nonzero_exit(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    d, out = tmp_path / "ranks", tmp_path / "out"
    d.mkdir()
    out.mkdir()
    write(ddp_trace(rank=0), d / "good.json.gz")
    (d / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit) as e:
        main(["scale", str(d), "--to", "A100", "-o", str(out), "--jobs", "2"])
    assert e.value.code != 0
    assert "1 of 2 traces failed" in capsys.readouterr().err
    rows = json.loads((out / "summary.json").read_text())["outputs"]
    assert {r["trace"] for r in rows} == {"good.json.gz", "bad.json"}


def test_scale_without_jobs_takes_two_processes_only_for_many_targets(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """commands/scale.auto_jobs (issue 34: scale --to all at most 3x one target on 2 CPUs): two processes for a
    trace to AUTO_TARGETS GPUs or more where a second CPU is free, else one; and the same outputs either way."""
    from habitat_trace import forking
    from habitat_trace.commands import scale as cmd
    from habitat_trace.pipeline import Options
    from habitat_trace.pipeline.options import DataParallel
    from habitat_trace.scale.specs import load_catalog

    opts = Options(load_catalog(None))
    many, few = opts.targets("all"), opts.targets("A100,H200")
    assert len(many) >= cmd.AUTO_TARGETS > len(few)
    one = [[Path("t.pt.trace.json")]]
    monkeypatch.setattr(forking, "second_cpu_free", lambda: True)
    monkeypatch.setattr("habitat_trace.pipeline.jobs.uncompressed_size", lambda f: 1 << 20)
    assert cmd.auto_jobs(one, many, opts, None) == 2
    assert cmd.auto_jobs(one, few, opts, None) == 1  # a short list does not repay the second process
    assert cmd.auto_jobs(one, many, opts, "tcp://scheduler:8786") == 1  # --dask decides
    assert cmd.auto_jobs([[Path("r0.json"), Path("r1.json")]], many, opts, None) == 1  # a run of ranks: fanout's
    dp = Options(load_catalog(None), data_parallel=DataParallel(world_size=2))
    assert cmd.auto_jobs(one, many, dp, None) == 1
    monkeypatch.setattr(forking, "second_cpu_free", lambda: False)
    assert cmd.auto_jobs(one, many, opts, None) == 1  # one CPU, or a thread or pool around this process


@pytest.mark.slow
def test_scale_to_all_writes_the_same_traces_in_two_processes_as_in_one(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from habitat_trace import forking
    from tests.conftest import MLP_FIXTURE

    from habitat_trace.commands import batch

    monkeypatch.setattr(forking, "second_cpu_free", lambda: True)  # the default takes two processes here
    pools: list[int] = []
    in_pool = batch._in_pool

    def spy(work: Any, options: Any, paths: Any, n: int, done: Any) -> Any:
        pools.append(n)
        return in_pool(work, options, paths, n, done)

    monkeypatch.setattr(batch, "_in_pool", spy)
    auto, one = tmp_path / "auto", tmp_path / "one"
    auto.mkdir()
    one.mkdir()
    main(["-q", "scale", str(MLP_FIXTURE), "--to", "all", "-o", str(auto)])
    main(["-q", "scale", str(MLP_FIXTURE), "--to", "all", "-o", str(one), "--jobs", "1"])
    names = sorted(p.name for p in one.iterdir())
    assert pools == [min(2, os.cpu_count() or 1)] or (os.cpu_count() or 1) < 2
    assert len(names) >= 32 and names == sorted(p.name for p in auto.iterdir())
    assert all((auto / n).read_bytes() == (one / n).read_bytes() for n in names)


def _spin_on_the_stop_flag(stop: Any, pids: Any, seconds: float) -> None:
    """A pool worker that checks the stop flag as scale_unit does before each write, for ``seconds``."""
    from habitat_trace.pipeline import pool

    pool.worker_init(stop, pids)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pool.stopping()


def test_a_signal_while_a_worker_checks_the_stop_flag_does_not_hang_it() -> None:
    """Pins the hang of CI's test_issue26_item3_ctrl_c_stops_a_directory_at_once[terminal-2] (2026-12-06): the
    worker's SIGINT handler set a multiprocessing.Event while the code it interrupted held the Event's lock in
    ``is_set``, so the worker hung in the handler and ``scale DIR --jobs 2`` never exited. With the Event this
    hangs within a few hundred signals (the child is still alive after the spin); with pool.StopFlag it ends."""
    import multiprocessing

    from habitat_trace.pipeline import pool

    ctx = multiprocessing.get_context("fork")
    stop, pids = pool.StopFlag(), ctx.SimpleQueue()
    child = ctx.Process(target=_spin_on_the_stop_flag, args=(stop, pids, 2.0))
    child.start()
    try:
        pid = pids.get()
        for _ in range(1000):
            os.kill(pid, signal.SIGINT)
            time.sleep(0.001)
        child.join(20)
        assert not child.is_alive(), "the worker hung in its signal handler"
        assert child.exitcode == 0 and stop.is_set()
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_a_signal_after_a_unit_has_returned_keeps_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT that lands as a worker's task has returned (before its ``busy`` flag is cleared) dropped the
    unit's rows, though its traces were written: the report would count fewer than are on disk. The task's result
    now stands; a signal while it runs still unwinds it."""
    from habitat_trace.pipeline import pool

    class LandsAtTheEnd(dict):
        def __setitem__(self, key: str, value: Any) -> None:
            super().__setitem__(key, value)
            if key == "busy" and value is False:
                raise KeyboardInterrupt  # the worker's handler, raising as the task ends

    state = LandsAtTheEnd(stop=pool.StopFlag(), busy=False, hit=False)
    monkeypatch.setattr(pool, "_WORKER", state)
    try:
        got = pool._task(lambda: "rows", ())
    except KeyboardInterrupt:  # caught here: a KeyboardInterrupt out of a test stops pytest's whole session
        got = None
    assert got == "rows", "the unit's rows were dropped"

    def unwound() -> None:
        raise KeyboardInterrupt  # the signal lands while the unit runs

    with pytest.raises(KeyboardInterrupt):
        pool._task(unwound, ())

"""What replays share (issue 34), checked against doing the work in full: a pass carried over from an earlier one
on another host clock (schedule.Passes, _carry) is the pass, and the band's ends replayed on the tables that keep
the calls' and steps' times only (replay.times_view, Run.band_tables) are those of the full tables."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from habitat_trace.ingest import load
from habitat_trace.pipeline import Options, Run
from habitat_trace.pipeline.figures import iteration_and_fastest
from habitat_trace.scale.engine import predict
from habitat_trace.timeline import hostband
from habitat_trace.timeline import schedule as sched
from habitat_trace.timeline.joint import replay_ranks
from habitat_trace.timeline.scaleout import decontended
from tests.conftest import DATA, MLP_FIXTURE, TRACES, needs_shared

OPTIONS = Options.of()
FSDP_DIR = DATA / "fsdp_mlp_h100x2"
SHARED = [TRACES / "h100-sxm" / f"{w}.pt.trace.json.gz" for w in ("gnmt_b64_fp32", "gpt2_b8_s1024_amp",
                                                                   "mlp_b32_fp32")]
TRACE_FILES = [MLP_FIXTURE, DATA / "emit_mlp_h100.pt.trace.json.gz", DATA / "a100_nccl_step5.json.gz"] + \
    [p for p in SHARED if p.is_file()]


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.name.split(".")[0])
def test_a_carried_pass_is_the_full_pass(path: Path) -> None:
    """Every clock a run replays on (the host clock, the band's ends, what-if speeds, queue delays): the pass the
    memo returns equals the pass run from scratch."""
    run = Run.open([path], OPTIONS)
    rank = run.ranks[0]
    t = rank.tables
    for target in OPTIONS.targets("A100,T4,H200"):
        dur = np.asarray(predict(t, rank.origin, target).dur_ns, dtype=np.int64)
        central = rank.clock.clock
        late = central.delayed(t.calls["end_ns"].to_numpy()[::50], np.full(len(t.calls["end_ns"].to_numpy()[::50]),
                                                                              20_000))
        for clock in (central, rank.band.fast, rank.band.slow, replace(central, speed=0.4), late, None):
            got_start, got_breaks = sched.schedule(t, dur, clock)
            want_start, want_breaks, _ = sched._run(sched.layout(t), dur, clock or sched.CpuClock.identity())
            assert np.array_equal(got_start, want_start)
            for f in ("window_start", "end", "new_end"):
                assert np.array_equal(getattr(got_breaks, f), getattr(want_breaks, f)), f


@needs_shared
def test_a_gpu_bound_pass_is_carried_over() -> None:
    """GPT-2 on a T4: the GPU sets the pace, so a faster or slower host moves no GPU row and the memo serves the
    band's passes (the test above checks that what it serves is right)."""
    run = Run.open([SHARED[1]], OPTIONS)
    rank = run.ranks[0]
    t = rank.tables
    dur = np.asarray(predict(t, rank.origin, OPTIONS.targets("T4")[0]).dur_ns, dtype=np.int64)
    sched.schedule(t, dur, rank.clock.clock)
    for clock in (rank.band.fast, rank.band.slow):
        carried = sched._carry(sched.layout(t), t.derived(sched.Passes).refs[-1], clock)
        assert carried is not None and np.array_equal(carried[0], sched._run(sched.layout(t), dur, clock)[0])


@pytest.mark.parametrize("path", TRACE_FILES + [FSDP_DIR], ids=lambda p: p.name.split(".")[0])
def test_the_band_ends_of_the_times_view_are_those_of_the_full_tables(path: Path) -> None:
    """BandEnds' rule (the slowest of N hosts' band; the fast end with the recorded contention out, the fastest
    steady step where the band is the model's) on the full tables gives the ends the view gives."""
    run = Run.open(path, OPTIONS)
    n = len(run.ranks)
    for target in OPTIONS.targets("A100,H200"):
        replay = run.replay(target)
        tables = [r.tables for r in run.ranks]
        preds = [predict(r.tables, r.origin, target) for r in run.ranks]
        bands = [hostband.slowest_of(r.band, n) for r in run.ranks]
        fast = replay_ranks(tables, [decontended(t, p) for t, p in zip(tables, preds)], [b.fast for b in bands])
        slow = replay_ranks(tables, preds, [b.slow for b in bands])
        for i, (t, b) in enumerate(zip(tables, bands)):
            f = iteration_and_fastest(t, fast.timelines[i])
            want = (f[1] if b.source == "model" else f[0], iteration_and_fastest(t, slow.timelines[i])[0])
            assert replay.ranks[i].band_ends.of(i) == want


def test_the_times_view_shares_what_reads_no_event_time() -> None:
    t = load(MLP_FIXTURE)
    run = Run([t], OPTIONS)
    view = run.ranks[0].band_tables
    assert view.derived(sched.layout) is t.derived(sched.layout)
    assert (view.event_ts_ns != t.event_ts_ns).any() and len(view.events) == len(t.events)

"""benchmarks/joint_pace_eval.py on the repository's real 2-rank fixtures: a pace of 1 leaves the clock as it was,
--mode clip never slows a window down, and on the FSDP pair it predicts no slower a step than the joint replay."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import joint_pace_eval as J  # noqa: E402
from habitat_trace.ingest.trace import load  # noqa: E402
from habitat_trace.pipeline import Options, Run  # noqa: E402

PAIRS = [ROOT / "tests" / "data" / "fsdp_mlp_h100x2", ROOT / "tests" / "data" / "dist_mlp_h100x2"]  # FSDP, DDP


def _run(d: Path) -> Run:
    return Run(sorted((load(p) for p in sorted(d.glob("*rank*.json*"))), key=lambda t: t.distributed.rank),
               Options.of())


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name)
def test_unit_pace_is_the_same_clock(pair: Path) -> None:
    rank = _run(pair).ranks[0]
    wins = J.windows(rank.tables)
    clock = rank.clock.clock
    t = np.sort(rank.tables.ops["ts_ns"].to_numpy())
    assert (J.repaced(clock, wins, {})(t) == clock(t)).all()


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name)
def test_clip_speeds_up_only(pair: Path) -> None:
    run = _run(pair)
    per = [J.medians(r.tables, r.clock.clock, J.windows(r.tables)) for r in run.ranks]
    clipped = J.paces(per, clip=True)
    assert all(p >= 1.0 for rank in clipped for p in rank.values())
    free = J.paces(per, clip=False)
    assert any(p != 1.0 for rank in free for p in rank.values())  # the two ranks' paces do differ


def test_clip_no_slower_than_the_joint_replay() -> None:
    pair = PAIRS[0]
    files = sorted(pair.glob("*rank*.json*"))
    assert len(files) == 2
    assert J.joint_ms_of(files, "clip") <= J.joint_ms_of(files, "none") * (1 + 1e-9)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name)
def test_floor_is_the_fastest_peer_and_clips_at_least_as_much_as_the_median(pair: Path) -> None:
    """floor: every window's pace >= 1 against the fastest rank-step, and >= its pace against the median."""
    run = _run(pair)
    per = [J.medians(r.tables, r.clock.clock, J.windows(r.tables)) for r in run.ranks]
    floor, clip = J.paces(per, clip=True, floor=True), J.paces(per, clip=True)
    assert all(p >= 1.0 for rank in floor for p in rank.values())
    assert all(floor[i][w] >= clip[i][w] - 1e-12 for i in range(len(per)) for w in clip[i])
    assert any(p > 1.0 for rank in floor for p in rank.values())

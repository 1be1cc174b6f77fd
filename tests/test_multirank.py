"""Joint replay of per-rank traces (timeline/joint.py, analysis/multirank.py) and `compare/explain DIR`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from habitat_trace.analysis.multirank import compare_ranks, load_ranks, predict_ranks, rank_table
from habitat_trace.cli import main
from habitat_trace.errors import TraceFormatError
from habitat_trace.scale.specs import load_catalog
from habitat_trace.timeline.joint import match, origin_split
from tests.dist_helpers import ddp_trace, write

CATALOG = load_catalog(None)
TRANSFER_US = 400.0


def rank_dir(tmp_path: Path, world: int = 2, with_seq: bool = True) -> Path:
    """Rank r's GEMM takes 500 + 400 r µs; the all-reduce's transfer is 400 µs, so rank r's NCCL kernel
    lasts 400 + (slowest GEMM - its own) µs, as a real rank's kernel spins until the last rank joins."""
    d = tmp_path / "ranks"
    d.mkdir()
    slowest = 500 + 400 * (world - 1)
    for r in range(world):
        gemm = 500 + 400 * r
        write(ddp_trace(rank=r, world=world, gemm_us=gemm, nccl_us=TRANSFER_US + slowest - gemm,
                        nelems=15_000_000, with_seq=with_seq), d / f"rank{r}.pt.trace.json.gz")
    return d


@pytest.mark.parametrize("with_seq", [True, False])
def test_match_by_seq_or_order(tmp_path: Path, with_seq: bool) -> None:
    traces = load_ranks(rank_dir(tmp_path, 3, with_seq))
    m = match(traces)
    assert len(m) == 6 and m.groupby("key")["rank"].nunique().eq(3).all()
    split = origin_split(traces)
    assert (split["transfer_ns"] == TRANSFER_US * 1000).all()
    assert sorted(split.groupby("rank")["wait_ns"].first().tolist()) == [0, 400_000, 800_000]


def test_joint_replay_on_the_origin_reproduces_the_measured_wait(tmp_path: Path) -> None:
    traces = load_ranks(rank_dir(tmp_path))
    v100 = CATALOG.resolve("V100")
    joint = predict_ranks(traces, [v100, v100], None)
    per_rank = rank_table(traces, joint)
    assert per_rank["wait_ms"].tolist() == pytest.approx([0.4, 0.0])
    assert per_rank["transfer_ms"].tolist() == pytest.approx([0.4, 0.4])
    assert joint.warnings == ()


def test_collective_ends_when_the_last_rank_joined_plus_transfer(tmp_path: Path) -> None:
    traces = load_ranks(rank_dir(tmp_path))
    joint = predict_ranks(traces, [CATALOG.resolve("V100")] * 2, CATALOG.resolve("A100"))
    c = joint.collectives
    for key, grp in c.groupby("key"):
        ends = [int(joint.timelines[r].gpu_end_ns[i]) for r, i in zip(grp["rank"], grp["row"])]
        starts = [int(joint.timelines[r].gpu_start_ns[i]) for r, i in zip(grp["rank"], grp["row"])]
        assert len(set(ends)) == 1, key  # ends together on every rank
        assert ends[0] == max(starts) + int(grp["transfer_ns"].iat[0])
    assert (c["transfer_ns"] < TRANSFER_US * 1000 * 0.55).all()  # NVLink 2 -> 3


def test_compare_reports_the_slowest_rank(tmp_path: Path) -> None:
    d = rank_dir(tmp_path, 3)
    table = compare_ranks(d, ["A100"])
    assert table["gpu"].tolist() == ["V100 SXM2 32GB (origin)", "A100 SXM4 80GB"]
    assert table["iteration_ms"].iat[1] < table["iteration_ms"].iat[0]
    per_rank = rank_table(load_ranks(d), predict_ranks(load_ranks(d), [CATALOG.resolve("V100")] * 3,
                                                        CATALOG.resolve("A100")))
    assert table["iteration_ms"].iat[1] == pytest.approx(per_rank["iteration_ms"].max())


def test_compare_and_explain_dir_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    d = rank_dir(tmp_path)
    main(["compare", str(d), "--to", "A100", "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert [r["slowest_rank"] for r in rows] in ([0, 0], [0, 1], [1, 0], [1, 1])
    assert rows[1]["method_share"]["collective"] > 0
    main(["explain", str(d), "--to", "A100", "--format", "json", "--interconnect", "pcie"])
    out = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    pcie = out["ranks"][0]["transfer_ms"]
    assert pcie[1] > pcie[0]  # over PCIe 4 an A100 pair moves the bytes slower than V100's NVLink 2


def test_directory_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceFormatError, match="no trace files"):
        load_ranks(empty)
    d = tmp_path / "dup"
    d.mkdir()
    write(ddp_trace(rank=0), d / "a.json.gz")
    write(ddp_trace(rank=0), d / "b.json.gz")
    with pytest.raises(TraceFormatError, match="rank 0 also in"):
        load_ranks(d)
    write(ddp_trace(distributed=False), empty / "c.json.gz")
    with pytest.raises(TraceFormatError, match="no distributedInfo"):
        load_ranks(empty)


def test_whatif_on_one_trace_compare_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    f = write(ddp_trace(), tmp_path / "one.json.gz")
    with pytest.raises(SystemExit) as e:
        main(["compare", str(f), "--to", "A100", "--nodes", "2"])
    assert e.value.code != 0 and "apply to `scale`" in capsys.readouterr().err


def test_ranks_run_on_their_host_clocks(tmp_path: Path) -> None:
    """issue 16 for compare/explain DIR: each rank's CPU side is replayed without the profiler's overhead (as for one
    trace) unless kept; a slower host (--cpu-speed) is never faster."""
    from habitat_trace.pipeline import Host

    d = rank_dir(tmp_path)
    kept = compare_ranks(d, ["A100"], host=Host(keep_profiler_overhead=True))
    default = compare_ranks(d, ["A100"])
    slow = compare_ranks(d, ["A100"], host=Host(cpu_speed=0.25))
    assert (default["iteration_ms"] <= kept["iteration_ms"] + 1e-9).all()
    assert (slow["iteration_ms"] >= default["iteration_ms"] - 1e-9).all()
    assert (slow["iteration_ms"] > default["iteration_ms"]).any()  # the CPU clock reaches the joint replay

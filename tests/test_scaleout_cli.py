"""Scale-out through the commands (issue 27, phase 2): ``--world-size N --strategy ddp|fsdp --bucket-mb MB`` on compare,
explain and scale, the same from the Python API, all from pipeline.DataParallel; bad values are one error line
before any work; the default output is the one without scale-out, to the byte."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from habitat_trace import pipeline
from habitat_trace.cli import DDP_BUCKET_MB, main
from habitat_trace.errors import HabitatTraceError
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import load
from habitat_trace.scale import dataparallel as D
from habitat_trace.scale.specs import load_catalog
from tests.conftest import DATA, MLP_FIXTURE, assert_perfetto_ok
from tests.dist_helpers import ddp_trace, write

CATALOG = load_catalog(None)
RESNET_STEP = DATA / "resnet50_cl_bn_step.pt.trace.json.gz"  # tests/data/README.md
SCALEOUT_COLUMNS = {"world_size", "strategy", "collectives", "comm_ms", "exposed_comm_ms"}


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``habitat-trace args`` in this process."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _compare(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, Any]]:
    code, out, err = _cli(capsys, "compare", str(MLP_FIXTURE), "--to", "A100,L4", "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("strategy", D.STRATEGIES)
@pytest.mark.slow
def test_compare_world_size_8(capsys: pytest.CaptureFixture[str], strategy: str) -> None:
    rows = _compare(capsys, "--world-size", "8", "--strategy", strategy)
    assert [r["gpu"] for r in rows] == ["H100 SXM5 80GB", "A100 SXM4 80GB", "L4"]
    for r in rows:
        assert SCALEOUT_COLUMNS <= set(r) and r["world_size"] == 8 and r["strategy"] == strategy
        assert r["collectives"] > 0 and r["comm_ms"] > 0 and 0 <= r["exposed_comm_ms"] <= r["comm_ms"] + 1e-9
        assert r["iteration_ms"] > 0 and r["iteration_source"] == "predicted"
        # $ / 1k it is for all 8 GPUs
        assert r["usd_per_1k_iterations"] == pytest.approx(r["usd_per_hour"] * 8 * r["iteration_ms"] / 3600)
        assert any(m.endswith("-synthesized") for m in r["method_share"])


@pytest.mark.slow
def test_compare_without_world_size_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    """The default, and --world-size 1 with any strategy: the same bytes, and no scale-out column."""
    plain = _cli(capsys, "compare", str(MLP_FIXTURE), "--to", "A100,L4", "--format", "json")
    one = _cli(capsys, "compare", str(MLP_FIXTURE), "--to", "A100,L4", "--format", "json", "--world-size", "1",
               "--strategy", "fsdp", "--bucket-mb", "4")
    assert plain == one and plain[0] == 0
    assert not SCALEOUT_COLUMNS & set(json.loads(plain[1])[0])
    table = _cli(capsys, "compare", str(MLP_FIXTURE), "--to", "A100")[1]
    assert "comm ms" not in table and "synthesized" not in table


def test_table_names_the_scale_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "compare", str(MLP_FIXTURE), "--to", "A100", "--world-size", "4")
    assert code == 0 and "one of 4 DDP ranks" in out and "comm ms" in out and "for all 4 GPUs" in out


def test_explain_world_size(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "explain", str(MLP_FIXTURE), "--to", "A100", "--world-size", "4", "--strategy",
                          "fsdp", "--format", "json", "--top", "40")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["steps"][0]["iteration_ms"] > 0
    assert any(k["method"] == "collective-synthesized" for k in doc["kernels"])


@pytest.mark.parametrize("strategy", D.STRATEGIES)
@pytest.mark.slow
def test_scale_writes_the_communication_stream(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                               strategy: str) -> None:
    out = tmp_path / "mlp.a100.x4.pt.trace.json.gz"
    code, _, err = _cli(capsys, "scale", str(MLP_FIXTURE), "--to", "A100", "--world-size", "4", "--strategy",
                        strategy, "-o", str(out))
    assert code == 0, err
    assert_perfetto_ok(out, MLP_FIXTURE)
    code, text, err = _cli(capsys, "check", str(out))
    assert code == 0, text + err
    back = load(out)
    assert (back.gpu[S.KCLASS] == "nccl").sum() > 0
    assert back.meta["habitat_trace"]["scale_out"]["strategy"] == strategy


@pytest.mark.slow
def test_the_api_scales_out() -> None:
    import habitat_trace

    t = habitat_trace.load(MLP_FIXTURE)
    one, fsdp = t.scale(to="A100"), t.scale(to="A100", world_size=4, strategy="fsdp")
    k = fsdp.kernels
    assert len(k) > len(one.kernels) and (k["method"] == "collective-synthesized").any()
    assert (k.loc[k["method"] == "collective-synthesized", "origin_dur_ns"] == 0).all()
    # more GPU work in all (the collectives and FSDP2's copies); not necessarily a longer busy union per step: the
    # optimizer steps a quarter of the parameters and the collectives overlap the compute stream
    assert k["dur_ns"].sum() > one.kernels["dur_ns"].sum()
    table = habitat_trace.compare(MLP_FIXTURE, "A100", world_size=2, strategy="ddp")
    assert (table["world_size"] == 2).all()


@pytest.mark.slow
def test_more_ranks_never_less_communication_per_step() -> None:
    """Through the commands' path: the replayed collectives' GPU time per step never falls as ranks are added
    (one node of 8 H100s, then whole nodes)."""
    from habitat_trace.analysis.compare import communication
    from habitat_trace.pipeline.fanout import RankFigures

    for strategy in D.STRATEGIES:
        comm = []
        for world in (2, 4, 8, 16):
            dp = pipeline.DataParallel(world, strategy)
            run = pipeline.Run.open(MLP_FIXTURE, pipeline.Options(CATALOG, data_parallel=dp))
            comm.append(communication(RankFigures.of(run.baseline().ranks[0]), dp)["comm_ms"])
        assert comm == sorted(comm) and comm[0] > 0, (strategy, comm)


# ---------------------------------------------------------------- bad values: one line, before any work
BAD = [
    (["--world-size", "0"], "--world-size 0"),
    (["--world-size", "-3"], "--world-size -3"),
    (["--world-size", "2", "--strategy", "zero"], "--strategy 'zero'"),
    (["--world-size", "2", "--bucket-mb", "0"], "--bucket-mb 0"),
    (["--world-size", "2", "--bucket-mb", "nan"], "--bucket-mb nan"),
    (["--world-size", "2", "--nodes", "3"], "--nodes 3"),
    (["--world-size", "2", "--strategy", "fsdp", "--fsdp-wrap", "layers"], "--fsdp-wrap 'layers'"),
]


@pytest.mark.parametrize("command", ["compare", "explain", "scale"])
@pytest.mark.parametrize("flags, words", BAD, ids=[" ".join(f) for f, _ in BAD])
def test_bad_values_are_one_error_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str,
                                       flags: list[str], words: str) -> None:
    out = tmp_path / "out.pt.trace.json.gz"
    extra = ["-o", str(out)] if command == "scale" else []
    code, stdout, stderr = _cli(capsys, command, str(MLP_FIXTURE), "--to", "A100", *flags, *extra)
    assert code != 0 and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], stderr
    assert "Traceback" not in stderr and not list(tmp_path.iterdir())


def test_a_directory_of_ranks_with_world_size_names_the_fix(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    d = tmp_path / "ranks"
    d.mkdir()
    for r in range(2):
        write(ddp_trace(rank=r, world=2), d / f"rank{r}.pt.trace.json.gz")
    code, out, err = _cli(capsys, "compare", str(d), "--to", "A100", "--world-size", "4")
    assert code != 0 and out == "" and len(err.strip().splitlines()) == 1
    assert "2 rank traces already" in err and "drop --world-size" in err
    with pytest.raises(HabitatTraceError, match="drop --world-size"):
        pipeline.Run.open(d, pipeline.Options(CATALOG, data_parallel=pipeline.DataParallel(4)))


def test_options_are_checked_where_they_are_made() -> None:
    with pytest.raises(HabitatTraceError, match="--world-size 0"):
        pipeline.DataParallel(0)
    with pytest.raises(HabitatTraceError, match="--strategy"):
        pipeline.DataParallel(2, "zero")
    with pytest.raises(HabitatTraceError, match="--bucket-mb"):
        pipeline.DataParallel(2, "ddp", -1.0)
    with pytest.raises(HabitatTraceError, match="--nodes 3"):
        pipeline.Options(CATALOG, deployment=pipeline.Deployment(nodes=3), data_parallel=pipeline.DataParallel(2))
    assert not pipeline.DataParallel().active and pipeline.DataParallel(2).plan(pipeline.Deployment()).world_size == 2


def test_no_broadcast_buffers_leaves_ddps_buffer_broadcast_out(capsys: pytest.CaptureFixture[str]) -> None:
    """The ResNet-50 fixture's 159 BatchNorm buffers: broadcast at each forward by default (a longer step, and the
    scale-out's parameters say so), not with --no-broadcast-buffers; the API takes the same keyword."""
    import habitat_trace

    rows = {}
    for flag in ("--broadcast-buffers", "--no-broadcast-buffers"):
        code, out, err = _cli(capsys, "compare", str(RESNET_STEP), "--to", "A100", "--world-size", "2", flag,
                              "--format", "json")
        assert code == 0, err
        rows[flag] = json.loads(out)[0]
    assert rows["--broadcast-buffers"]["iteration_ms"] > rows["--no-broadcast-buffers"]["iteration_ms"]
    api = habitat_trace.compare(RESNET_STEP, "A100", world_size=2, broadcast_buffers=False)
    assert api["iteration_ms"].iat[0] == pytest.approx(rows["--no-broadcast-buffers"]["iteration_ms"])
    with pytest.raises(HabitatTraceError, match="broadcast_buffers"):
        pipeline.DataParallel(2, broadcast_buffers="no")  # type: ignore[arg-type]


def test_fsdp_wrap_none_is_one_unit(capsys: pytest.CaptureFixture[str]) -> None:
    """--fsdp-wrap none: the whole model one unit (fully_shard on the root alone): the MLP fixture's 8 linears,
    inferred as 8 units, cost 8 units' hooks and all-gathers more than one; the record names the wrap."""
    rows = {}
    for wrap in ("blocks", "none"):
        code, out, _ = _cli(capsys, "compare", str(MLP_FIXTURE), "--to", "H100", "--world-size", "4", "--strategy",
                            "fsdp", "--fsdp-wrap", wrap, "--format", "json")
        assert code == 0
        rows[wrap] = json.loads(out)[0]
    assert rows["none"]["collectives"] < rows["blocks"]["collectives"]
    assert rows["none"]["iteration_ms"] < rows["blocks"]["iteration_ms"]
    dp = pipeline.DataParallel(4, "fsdp", fsdp_wrap="none")
    assert dp.plan(pipeline.Deployment()).fsdp_wrap == "none"


def test_the_cli_default_bucket_is_ddps() -> None:
    assert DDP_BUCKET_MB == D.DEFAULT_BUCKET_MB == 25.0


def test_issue31_hidden_communication_is_said_under_the_table() -> None:
    """Issue 31: DDP's 2- and 4-rank rows were identical to 0.01% and nothing said why; a row whose exposed
    communication is under 1% of its step now says that the collectives are hidden (and only that row)."""
    from habitat_trace.commands.compare import notes

    base = {"memory_source": "estimate", "ranks": 1, "world_size": 4, "price_source": "", "iteration_source": "given",
            "iteration_low_ms": 1.0, "iteration_high_ms": 1.0}
    rows = [{**base, "gpu": "H100 SXM5 80GB", "iteration_ms": 66.54, "comm_ms": 5.0, "exposed_comm_ms": 0.11},
            {**base, "gpu": "L4", "iteration_ms": 300.0, "comm_ms": 40.0, "exposed_comm_ms": 12.0}]
    said = [n for n in notes(rows) if n.startswith("communication hidden")]
    assert len(said) == 1 and "H100 SXM5 80GB" in said[0] and "L4" not in said[0]
    assert not any(n.startswith("communication hidden") for n in notes(rows[1:]))

"""A run of several ranks through pipeline/fanout.py (map -> reduce -> map, one rank's tables in a process at a time)
gives Run.replay's figures and traces, byte for byte: in this process, in local processes (--jobs) and on a real
Dask cluster (the recipe of docs/distributed.md, on a 64-rank run replicated from a real 2-rank one)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from habitat_trace.analysis.compare import gpu_table, ranks_table
from habitat_trace.ingest.trace import load
from habitat_trace.pipeline import Options, Run
from habitat_trace.pipeline import fanout
from habitat_trace.pipeline.fanout import LocalPool, fan_out
from habitat_trace.scale.specs import load_catalog
from tests.dist_helpers import replicate_ranks

CATALOG = load_catalog(None)
DATA = Path(__file__).parent / "data"
DDP = [DATA / "dist_mlp_h100x2" / f"ddp-rank{r}.pt.trace.json.gz" for r in (0, 1)]
FSDP = [DATA / "fsdp_mlp_h100x2" / f"rank{r}.pt.trace.json.gz" for r in (0, 1)]


def single_process(files: list[Path], targets: list[str], options: Options) -> pd.DataFrame:
    return gpu_table(Run([load(f) for f in files], options), [CATALOG.resolve(t) for t in targets])


@pytest.mark.parametrize("files", [DDP, FSDP], ids=["ddp", "fsdp"])
def test_fanned_compare_equals_the_single_process_one(files: list[Path]) -> None:
    options = Options(CATALOG)
    targets = ["A100", "T4"]
    fanned = ranks_table(files, options, [CATALOG.resolve(t) for t in targets], LocalPool(1))
    pd.testing.assert_frame_equal(fanned, single_process(files, targets, options), check_exact=True)
    # the joint replay's range (issue 31: the slowest host of the run, the fast end decontended, JOINT_* widening)
    # is among what is equal, not a point: the fanout replays the band's ends as Run.replay does
    assert (fanned["iteration_low_ms"] < fanned["iteration_ms"]).all()
    assert (fanned["iteration_high_ms"] > fanned["iteration_ms"]).all()
    assert set(fanned["range_source"]) == {"model"}


def test_fanned_joint_replay_equals_run_replay(tmp_path: Path) -> None:
    """Four ranks (the DDP pair twice): the settled collectives, per target, as Run.replay's."""
    files = replicate_ranks(DDP, 4, tmp_path / "ranks")
    options = Options(CATALOG)
    a100 = CATALOG.resolve("A100")
    fanned = fan_out(files, options, [a100], LocalPool(2))
    run = Run([load(f) for f in files], options)
    for figures, replay in zip(fanned.figures, [run.baseline(), run.replay(a100)]):
        pd.testing.assert_frame_equal(figures.collectives, replay.collectives, check_exact=True)
        assert [r.headline for r in figures.ranks] == [r.headline for r in replay.ranks]
        assert figures.warnings == replay.warnings


@pytest.mark.parametrize("cache_bytes,loads", [(fanout.RANK_CACHE_BYTES, 1), (0, 2)], ids=["kept", "bounded"])
def test_a_small_run_here_ingests_each_rank_once(cache_bytes: int, loads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process (--jobs 1) a run whose ranks fit RANK_CACHE_BYTES keeps them for every map; above it, each map
    ingests its rank again (one rank's tables at a time). Same figures either way."""
    import habitat_trace.ingest.trace as trace_module

    calls: list[Path] = []

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        calls.append(Path(path))
        return load(path, *args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(trace_module, "load", counting)
    monkeypatch.setattr(fanout, "RANK_CACHE_BYTES", cache_bytes)
    options = Options(CATALOG)
    a100 = CATALOG.resolve("A100")
    fanned = fan_out(DDP, options, [a100], LocalPool(1))
    assert sorted(calls) == sorted(DDP * loads)
    run = Run([load(f) for f in DDP], options)
    for figures, replay in zip(fanned.figures, [run.baseline(), run.replay(a100)]):
        assert [r.headline for r in figures.ranks] == [r.headline for r in replay.ranks]


RECIPE_START = "<!-- recipe: tests/test_fanout.py runs these lines on a local cluster -->"


def recipe() -> list[str]:
    """The habitat-trace lines of docs/distributed.md's Dask recipe."""
    doc = (Path(__file__).parent.parent / "docs" / "distributed.md").read_text()
    block = doc.split(RECIPE_START, 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.startswith("habitat-trace ")]


@pytest.mark.slow
def test_64_ranks_on_a_dask_cluster_as_in_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The recipe's compare on a real (in-process) Dask cluster: a 64-rank run replicated from the real 2-rank DDP
    one; the table and the joint replay (every rank's matched collectives, transfer and wait) are the single-process
    path's (pipeline.Run, every rank's tables in this process), byte for byte."""
    distributed = pytest.importorskip("distributed")
    import habitat_trace.analysis.compare as analysis
    import habitat_trace.pipeline.fanout as fanout
    from habitat_trace.cli import main

    ranks = tmp_path / "ranks"
    replicate_ranks(DDP, 64, ranks)
    (line,) = [x for x in recipe() if x.startswith("habitat-trace compare")]
    seen: dict = {}
    fan_out_, gpu_table_ = fanout.fan_out, analysis.gpu_table
    monkeypatch.setattr(fanout, "fan_out", lambda *a, **k: seen.setdefault("fanned", fan_out_(*a, **k)))
    with distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None,
                                  resources={fanout.MEMORY_RESOURCE: 2e9}) as cluster:
        argv = line.replace("tcp://scheduler:8786", cluster.scheduler_address).split()[1:]
        argv[argv.index("ranks/")] = str(ranks)
        main(argv + ["--format", "csv"])
    on_dask = capsys.readouterr().out
    # the single-process path: the same command with every rank's tables in this process
    monkeypatch.setattr(fanout, "rank_files", lambda path: [])
    monkeypatch.setattr(analysis, "gpu_table", lambda run, *a, **k: gpu_table_(seen.setdefault("run", run), *a, **k))
    main([a for a in argv if a != "--dask" and a != cluster.scheduler_address] + ["--format", "csv"])
    assert capsys.readouterr().out == on_dask
    run, fanned = seen["run"], seen["fanned"]
    assert len(run.ranks) == 64 and len(fanned.figures[0].ranks) == 64
    targets = [CATALOG.resolve(t) for t in argv[argv.index("--to") + 1].split(",")]
    for figures, replay in zip(fanned.figures, [run.baseline()] + [run.replay(t) for t in targets]):
        assert len(replay.collectives) == 64 * 32  # every DDP all-reduce matched on every rank
        pd.testing.assert_frame_equal(figures.collectives, replay.collectives, check_exact=True)
        assert [r.headline for r in figures.ranks] == [r.headline for r in replay.ranks]


@pytest.mark.slow
def test_a_dask_cluster_without_memory_is_refused_before_any_work() -> None:
    """A task that asks for a resource no worker has would wait forever: one error naming the fix instead."""
    distributed = pytest.importorskip("distributed")
    from habitat_trace.errors import HabitatTraceError
    from habitat_trace.pipeline.fanout import DaskPool

    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
        with pytest.raises(HabitatTraceError, match="--resources MEMORY="):
            DaskPool.connect(c.scheduler_address)


@pytest.mark.slow
def test_scale_recipe_on_a_dask_cluster_writes_the_single_process_traces(tmp_path: Path) -> None:
    """The recipe's scale on 8 ranks replicated from the FSDP pair: every written trace is, byte for byte, the one
    pipeline.Run writes with every rank's tables in one process (commands/batch.scale_unit)."""
    distributed = pytest.importorskip("distributed")
    from habitat_trace.cli import main
    from habitat_trace.commands.batch import Unit, scale_unit
    from habitat_trace.pipeline.document import output_name
    from habitat_trace.pipeline.fanout import MEMORY_RESOURCE

    files = replicate_ranks(FSDP, 8, tmp_path / "ranks")
    (line,) = [x for x in recipe() if x.startswith("habitat-trace scale")]
    argv = line.split()[1:]
    argv[argv.index("ranks/")] = str(tmp_path / "ranks")
    argv[argv.index("out/")] = str(tmp_path / "out") + "/"
    (tmp_path / "out").mkdir()
    (tmp_path / "ref").mkdir()
    with distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None,
                                  resources={MEMORY_RESOURCE: 2e9}) as cluster:
        main([cluster.scheduler_address if a == "tcp://scheduler:8786" else a for a in argv])
    targets = tuple(CATALOG.resolve(t) for t in argv[argv.index("--to") + 1].split(","))
    paths = {(f, t.name): tmp_path / "ref" / output_name(f, t) for f in files for t in targets}
    rows = scale_unit(Unit(tuple(files), targets), Options(CATALOG), paths).rows
    assert len(rows) == 8 * len(targets) and not any(r["error"] for r in rows)
    for p in paths.values():
        assert (tmp_path / "out" / p.name).read_bytes() == p.read_bytes(), p.name
    assert not list((tmp_path / "out").glob(".habitat-staging.*"))


def test_api_compare_of_a_ranks_directory_fans_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """habitat_trace.compare(DIR) goes through the fanout (one rank's tables at a time) and gives the rows of the
    loaded run's Trace.compare, prices and the joint replay's range included."""
    import habitat_trace
    import habitat_trace.pipeline.fanout as fanout

    calls: list[int] = []
    fan_out_ = fanout.fan_out
    monkeypatch.setattr(fanout, "fan_out", lambda files, *a, **k: calls.append(len(files)) or fan_out_(files, *a, **k))
    prices = {"A100": 1.5}
    fanned = habitat_trace.compare(FSDP[0].parent, ["A100"], prices)
    assert calls == [2]
    pd.testing.assert_frame_equal(fanned, habitat_trace.open(FSDP[0].parent).compare(["A100"], prices),
                                  check_exact=True)


def test_scale_dir_writes_gzip_where_the_name_says_so(tmp_path: Path) -> None:
    """Regression: scale DIR wrote each rank's trace to a staging name and renamed it; a staging *suffix* hid the .gz
    from the writer, so it wrote plain JSON under .json.gz names. Now the outputs are the single-process ones."""
    from habitat_trace.cli import main
    from habitat_trace.commands.batch import Unit, scale_unit
    from habitat_trace.pipeline.document import output_name

    (tmp_path / "out").mkdir()
    (tmp_path / "ref").mkdir()
    # --jobs 2: the writer (commands/batch.write_staged) travels to the pool's processes
    main(["-q", "scale", str(FSDP[0].parent), "--to", "A100", "-o", str(tmp_path / "out") + "/", "--jobs", "2"])
    a100 = CATALOG.resolve("A100")
    paths = {(f, a100.name): tmp_path / "ref" / output_name(f, a100) for f in FSDP}
    assert not any(r["error"] for r in scale_unit(Unit(tuple(FSDP), (a100,)), Options(CATALOG), paths).rows)
    for p in paths.values():
        assert (tmp_path / "out" / p.name).read_bytes()[:2] == b"\x1f\x8b"
        assert (tmp_path / "out" / p.name).read_bytes() == p.read_bytes(), p.name


@pytest.mark.parametrize("command", ["compare", "scale"])
def test_dask_without_ranks_to_run_there_is_one_usage_line(command: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """--dask on a trace that is not the ranks of a run (the only work sent to Dask) was silently ignored."""
    from habitat_trace.cli import main

    out = ["-o", str(tmp_path) + "/"] if command == "scale" else []
    with pytest.raises(SystemExit) as exc:
        main([command, str(DDP[0]), "--to", "A100", "--dask", "tcp://nowhere:8786", *out])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: --dask tcp://nowhere:8786: ") and str(DDP[0]) in err and "drop --dask" in err


def test_compare_jobs_on_one_trace_is_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``compare TRACE --jobs N`` on one trace ran in one process and said nothing (only a directory's ranks are
    spread over processes); now one usage line, as --dask."""
    from habitat_trace.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["compare", str(DDP[0]), "--to", "A100", "--jobs", "2"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: --jobs 2: ") and str(DDP[0]) in err and "drop --jobs" in err

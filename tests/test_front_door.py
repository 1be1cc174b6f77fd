"""Issue 33's front door: one keyword -> Options map (pipeline.options.Options.of) for the CLI, the API and the hook;
``habitat_trace.open(path, **options) -> Trace`` whose methods return results; ``inspect`` through the run, so a
directory's ranks are replayed jointly everywhere; Run and Options each built in two places."""
from __future__ import annotations

import ast
import functools
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import habitat_trace
from habitat_trace.cli import app, main
from habitat_trace.pipeline.options import KEYWORDS, Options
from tests.conftest import MLP_FIXTURE, ROOT
from tests.dist_helpers import ddp_trace, write

H100 = "NVIDIA H100 80GB HBM3"
PACKAGE = ROOT / "habitat_trace"


@pytest.fixture
def ranks(tmp_path: Path) -> Path:
    d = tmp_path / "ranks"
    d.mkdir()
    for r in range(2):
        write(ddp_trace(rank=r, world=2, device=H100, gemm_us=500 + 150 * r), d / f"rank{r}.pt.trace.json.gz")
    return d


def cli_json(args: list[Any], capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    main([str(a) for a in args] + ["--format", "json"])
    return json.loads(capsys.readouterr().out)


# --- one keyword -> Options map ------------------------------------------------------------------------------------

def test_every_predicting_command_takes_every_option_by_its_keyword() -> None:
    """The CLI's parameters are Options.of's keywords, so cli._options passes each through the one map."""
    import typer.main

    commands = {c.name: c for c in typer.main.get_command(app).commands.values()}  # type: ignore[attr-defined]
    for name in ("scale", "compare", "explain"):
        params = {p.name for p in commands[name].params}
        assert set(KEYWORDS) <= params, (name, set(KEYWORDS) - params)
    assert {"specs", "origin"} <= {p.name for p in commands["inspect"].params}


def test_an_unknown_option_is_named_with_the_known_ones() -> None:
    with pytest.raises(TypeError, match="unknown option 'worldsize'; the options are specs, origin, cpu_speed"):
        habitat_trace.open(MLP_FIXTURE, worldsize=2)


def test_the_api_takes_the_deployment_whatifs(ranks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The API could not set --interconnect, --gpus-per-node, --nodes: now the same keywords, the same rows."""
    table = habitat_trace.open(ranks, interconnect="pcie").compare(["H200"])
    rows = cli_json(["compare", ranks, "--to", "H200", "--interconnect", "pcie"], capsys)
    assert [(r["gpu"], r["iteration_ms"]) for r in rows] == list(zip(table["gpu"], table["iteration_ms"]))
    assert [r["whatif"] for r in rows] == [None, "pcie"] and table["whatif"].iat[1] == "pcie"
    plain = habitat_trace.open(ranks).compare(["H200"])
    assert plain["iteration_ms"].iat[1] != table["iteration_ms"].iat[1]  # the what-if changes the collectives


def test_the_hook_takes_the_host_and_the_world_size(tmp_path: Path) -> None:
    """The hook could not set the host or the world size."""

    class Profiler:  # what the handler calls of torch.profiler.profile
        def export_chrome_trace(self, path: str) -> None:
            shutil.copyfile(MLP_FIXTURE, path)

    handler = habitat_trace.tensorboard_trace_handler(tmp_path, to=["A100"], worker_name="w", cpu_speed=2.0,
                                                      world_size=2)
    original, scaled = handler(Profiler())
    header = json.loads(gzip.decompress(scaled.read_bytes()))["habitat_trace"]
    assert header["host"]["cpu_speed"] == 2.0 and header["scale_out"]["world_size"] == 2
    with pytest.raises(TypeError, match="unknown option"):
        habitat_trace.tensorboard_trace_handler(tmp_path, to=["A100"], cpu=2.0)


def test_options_but_changes_only_what_it_names() -> None:
    o = Options.of(world_size=4, strategy="fsdp", cpu_speed=1.5)
    changed = o.but(interconnect="pcie")
    assert (changed.data_parallel, changed.host.cpu_speed, changed.deployment.interconnect) == (
        o.data_parallel, 1.5, "pcie")


# --- a Trace's methods return results -----------------------------------------------------------------------------

def test_trace_methods_return_results_and_print_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    t = habitat_trace.open(MLP_FIXTURE)
    capsys.readouterr()
    [summary] = t.inspect(top=3)
    table = t.compare(["A100"])
    e = t.explain(["L4"], top=2)
    v = t.validate(MLP_FIXTURE, top=1)
    assert capsys.readouterr() == ("", "")
    assert len(summary["kernels"]["top"]) == 3 and summary["profiler_overhead"]["origin_step_ms"] > 0
    assert list(table["gpu"]) == ["H100 SXM5 80GB", "A100 SXM4 80GB"]
    assert len(e.kernels) == 2 and e.steps["target"].iat[0] == "L4"
    assert v.steps.set_index("figure")["error_pct"].abs().max() == 0.0 and list(v.steps["rank"].unique()) == [None]
    assert summary["profiler_overhead"]["origin_step_ms"] == table["iteration_ms"].iat[0]


def test_a_scaled_trace_scales_on_from_its_target_with_its_host() -> None:
    t = habitat_trace.open(MLP_FIXTURE, cpu_speed=2.0)
    a100 = t.scale(to="A100")
    assert a100.options.host.cpu_speed == 1.0 and a100.options.origin.name == "A100 SXM4 80GB"
    assert a100.scale(to="H100").prediction.origin.name == "A100 SXM4 80GB"


# --- inspect through the run ---------------------------------------------------------------------------------------

def test_inspect_replays_a_directorys_ranks_jointly(ranks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """inspect replayed each rank alone and explain them jointly: rank 0's origin step was 1.337 ms in
    inspect_dir.csv and 1.487 ms in explain_dir.csv (the same fixture). Now one figure."""
    inspected = [s["profiler_overhead"]["origin_step_ms"] for s in habitat_trace.open(ranks).inspect()]
    steps = cli_json(["explain", ranks, "--to", "H200", "--top", "1"], capsys)["steps"]
    assert inspected == [s["origin_iteration_ms"] for s in steps]
    assert inspected[0] == pytest.approx(1.485363)  # issue 31's overhead model (1.487235 with issue 16's)
    rows = cli_json(["inspect", ranks], capsys)["profiler_overhead"]
    assert [r["origin_step_ms"] for r in rows] == inspected


def test_inspect_takes_specs_and_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """inspect used the default options for the origin step, so --from (and --specs) could not name its GPU."""
    doc = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
    doc["deviceProperties"][0]["name"] = "Prototype GPU"
    path = tmp_path / "proto.json"
    path.write_text(json.dumps(doc))
    assert cli_json(["inspect", path], capsys)["profiler_overhead"][0]["origin_step_ms"] is None
    named = cli_json(["inspect", path, "--from", "H100"], capsys)["profiler_overhead"][0]["origin_step_ms"]
    specs = tmp_path / "proto.toml"
    specs.write_text('[gpus."Prototype GPU"]\nbase = "H100"\n')
    assert cli_json(["inspect", path, "--specs", specs], capsys)["profiler_overhead"][0]["origin_step_ms"] == named
    assert named == cli_json(["compare", path, "--to", "A100", "--from", "H100"], capsys)[0]["iteration_ms"]


# --- Run and Options are built in two places each -----------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _calls() -> tuple[tuple[str, str, str], ...]:
    """Every call in the package's functions: (module path, "Class.function" or "function", the callee's name)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        owners = {id(f): c.name for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body}
        where = str(path.relative_to(ROOT).with_suffix(""))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                owner = owners.get(id(node), "")
                for call in ast.walk(node):
                    if isinstance(call, ast.Call):
                        f = call.func
                        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                        out.append((where, f"{owner}.{node.name}" if owner else node.name, name))
    return tuple(out)


def _builders(cls_name: str) -> set[str]:
    """Where the package calls ``cls_name(...)`` (or ``cls(...)`` inside it): "module:function"."""
    return {f"{where}:{fn}" for where, fn, name in _calls()
            if name == cls_name or (name == "cls" and fn.split(".")[0] == cls_name)}


def test_run_and_options_are_built_in_two_places_each() -> None:
    """Options was built in 6 places with 4 sets of keywords, Run in 11 (four rebuilding a run their caller had)."""
    assert _builders("Run") == {"habitat_trace/pipeline/run:Run.read", "habitat_trace/pipeline/run:Run.under"}
    assert _builders("Options") == {"habitat_trace/pipeline/options:Options.of"}  # and Options.but: replace(self)


def test_the_builders_check_can_fail() -> None:
    assert "habitat_trace/pipeline/run:Run.under" in _builders("Run")
    assert _builders("RankReplay") >= {"habitat_trace/pipeline/run:Run.replay"}


"""Issue 26: one workflow for every command. A regression test per numbered item of the issue, named for it (item 1
is in test_api.py, item 4 in test_scale_command.py); each was reproduced on main 844341b before the fix."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import habitat_trace
from habitat_trace.pipeline import Options, Run
from habitat_trace.scale.specs import load_catalog
from tests.conftest import MLP_FIXTURE, ROOT, TRACES, needs_shared
from tests.dist_helpers import ddp_trace, launch_bound_trace, write
from tests.test_cli_process import ANSI, Pty, _env, cli, default_signals

CATALOG = load_catalog(None)


def _doc(path: Path = MLP_FIXTURE) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _ranks(tmp_path: Path, world: int = 2) -> Path:
    d = tmp_path / "ranks"
    d.mkdir()
    for r in range(world):
        write(ddp_trace(rank=r, world=world, gemm_us=500 + 100 * r), d / f"rank{r}.pt.trace.json.gz")
    return d


def _header(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["habitat_trace"]


# --- item 2: a directory takes every option a file does ------------------------------------------------------

@pytest.mark.slow
def test_issue26_item2_scale_dir_to_list_and_all(tmp_path: Path) -> None:
    d, out = _ranks(tmp_path), tmp_path / "out"
    out.mkdir()
    res = cli("scale", d, "--to", "A100,L4", "-o", out, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert len(list(out.glob("*.pt.trace.json.gz"))) == 4 and len(json.loads(res.stdout)["outputs"]) == 4
    every = tmp_path / "every"
    every.mkdir()
    res = cli("scale", d, "--to", "all", "-o", every, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["outputs"]) == 2 * len(CATALOG.specs)


@pytest.mark.slow
def test_issue26_item2_explain_dir_to_list(tmp_path: Path) -> None:
    res = cli("explain", _ranks(tmp_path), "--to", "A100,L4", "--format", "json", "--top", "2")
    assert res.returncode == 0, res.stderr
    steps = json.loads(res.stdout)["steps"]
    assert [(s["target"], s["rank"]) for s in steps] == [("A100 SXM4 80GB", 0), ("A100 SXM4 80GB", 1), ("L4", 0),
                                                         ("L4", 1)]


@pytest.mark.slow
def test_issue26_item2_scale_dir_takes_the_host_options(tmp_path: Path) -> None:
    d = _ranks(tmp_path)
    for args, speed, removed in ((["--cpu-speed", "2"], 2.0, True), (["--keep-profiler-overhead"], 1.0, False)):
        out = tmp_path / f"out{speed}{removed}"
        out.mkdir()
        res = cli("scale", d, "--to", "A100", "-o", out, *args)
        assert res.returncode == 0, res.stderr
        hosts = [_header(p)["host"] for p in sorted(out.glob("*.pt.trace.json.gz"))]
        assert len(hosts) == 2
        assert all(h["cpu_speed"] == speed and h["profiler_overhead_removed"] is removed for h in hosts)


@pytest.mark.slow
def test_issue26_item2_compare_dir_csv_keeps_the_price(tmp_path: Path) -> None:
    res = cli("compare", _ranks(tmp_path), "--to", "A100", "--format", "csv", "--price", "A100=1.25")
    assert res.returncode == 0, res.stderr
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    a100 = next(r for r in rows if r["gpu"] == "A100 SXM4 80GB")
    assert (a100["usd_per_hour"], a100["price_source"], a100["ranks"]) == ("1.25", "--price", "2")
    assert float(a100["usd_per_1k_iterations"]) == pytest.approx(1.25 * 2 * float(a100["iteration_ms"]) / 3600)


def test_issue26_item2_compare_dir_applies_the_launch_back_pressure(tmp_path: Path) -> None:
    """A directory of ranks took a joint replay without the launch-queue rounds a single file gets: each rank of a
    directory (no collectives to wait for) must replay as that trace alone does, queue delays included."""
    from habitat_trace.timeline.joint import joint_replay

    d = tmp_path / "ranks"
    d.mkdir()
    for r in range(2):
        write(launch_bound_trace(rank=r), d / f"rank{r}.json.gz")
    options = Options(CATALOG)
    t4 = CATALOG.resolve("T4")
    joint = Run.open(d, options).replay(t4)
    alone = Run.open(d / "rank1.json.gz", options).replay(t4)
    assert np.array_equal(joint.ranks[1].timeline.ts_ns, alone.ranks[0].timeline.ts_ns)
    assert len(joint.ranks[1].host.clock.delay_at_ns) > 0  # the queue filled: launches were held back
    rank = joint.ranks[1]
    plain = joint_replay([rank.tables], [rank.prediction], [rank.rank.clock.clock])
    assert not np.array_equal(plain.timelines[0].ts_ns, rank.timeline.ts_ns)


@pytest.mark.slow
def test_issue26_item2_traces_without_ranks_say_no_none(tmp_path: Path) -> None:
    d, out = tmp_path / "traces", tmp_path / "out"
    d.mkdir()
    out.mkdir()
    for name in ("a", "b"):
        (d / f"{name}.pt.trace.json.gz").write_bytes(MLP_FIXTURE.read_bytes())
    res = cli("scale", d, "--to", "L4", "-o", out, env=_env(COLUMNS="200"))
    assert res.returncode == 0, res.stderr
    assert "None" not in res.stdout and "slowest trace" in res.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert {r["rank"] for r in summary["outputs"]} == {None}


# --- item 3: Ctrl-C stops a directory at once -------------------------------------------------------------------

def _outputs(out: Path) -> set[str]:
    return {p.name for p in out.iterdir() if p.name.endswith(".pt.trace.json.gz")}


class _Stoppable:
    """The CLI on ``args`` as a child that a Ctrl-C stops: typed at its terminal (``how`` "terminal": the signal
    goes to its process group, workers included) or sent to its main process alone ("main-only", ``kill -INT``),
    which must stop its workers itself."""

    def __init__(self, args: list[Any], how: str) -> None:
        self.how = how
        if how == "terminal":
            self.term = Pty(args, cols=120)
            self.proc = self.term.proc
        else:
            self.proc = subprocess.Popen([sys.executable, "-m", "habitat_trace", *map(str, args)], cwd=ROOT,
                                         env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         start_new_session=True, preexec_fn=default_signals)

    def ctrl_c(self) -> float:
        """Send it; returns when it was sent, once it has gone out: a terminal sends the SIGINT when it takes the ^C
        in, then echoes it (a loaded machine took >= 2 targets' writes between our write and that, once in 50)."""
        if self.how == "terminal":
            os.write(self.term.master, b"\x03")
            sent = time.monotonic()
            assert self.term.read_until("^C", timeout=30), self.term.text
            return sent
        os.kill(self.proc.pid, signal.SIGINT)
        return time.monotonic()

    def finish(self) -> tuple[int, str]:
        """Its exit code and what it said: its stderr, or at a terminal all it wrote, without escape sequences."""
        if self.how == "terminal":
            return self.term.finish(), ANSI.sub("", self.term.text)
        _, text = self.proc.communicate(timeout=120)
        return self.proc.returncode, text


@pytest.mark.parametrize("how, jobs", [("terminal", 1), ("terminal", 2), ("main-only", 1), ("main-only", 2)])
@pytest.mark.slow
def test_issue26_item3_ctrl_c_stops_a_directory_at_once(tmp_path: Path, how: str, jobs: int) -> None:
    """Ctrl-C during ``scale DIR`` (9 traces x 12 targets) let outputs appear for seconds and exited 130 only at
    the end. Now no output appears after the signal (an in-flight write unwinds; at most a rename already done in
    each worker), no temporary or partial file is left, it exits within seconds, and it says what was written.
    "main-only": SIGINT to the main process alone (``kill -INT``), which must stop its workers itself."""
    d, out = tmp_path / "traces", tmp_path / "out"
    d.mkdir()
    out.mkdir()
    for i in range(3):
        (d / f"t{i}.pt.trace.json.gz").write_bytes(MLP_FIXTURE.read_bytes())
    job = _Stoppable(["scale", d, "--to", "all", "-o", out, "--jobs", str(jobs)], how)
    end = time.monotonic() + 120
    while len(_outputs(out)) < 3 and job.proc.poll() is None:
        assert time.monotonic() < end
        time.sleep(0.01)
    stopped_at = job.ctrl_c()
    before = _outputs(out)
    code, text = job.finish()
    assert code == 130, text
    assert time.monotonic() - stopped_at < 15, "it went on after the signal"
    after = _outputs(out)
    assert len(after - before) <= jobs, f"{len(after - before)} outputs appeared after the signal"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")], "a temporary file was left"
    for p in out.iterdir():
        assert json.loads(gzip.decompress(p.read_bytes()))["traceEvents"], f"{p.name} is partial"
    assert f"aborted: wrote {len(after)} traces before the signal" in text.replace("\r", ""), text
    assert len(after) < 3 * len(CATALOG.specs)


@pytest.mark.parametrize("how", ["terminal", "main-only"])
def test_ctrl_c_stops_the_ranks_of_a_distributed_run_at_once(tmp_path: Path, how: str) -> None:
    """Item 3 for a run of ranks (pipeline/fanout.py on 2 processes): Ctrl-C went on until the rank that
    ProcessPoolExecutor had already queued to each worker had run to its end (~4 s on 4 ranks of 400 steps, tens of
    seconds on these; a rank of a GB trace: minutes), and ``kill -INT`` of the main process alone until every queued
    rank had. Now it exits 130 within seconds, with no output and no staging or temporary file left."""
    d, out = tmp_path / "ranks", tmp_path / "out"
    d.mkdir()
    out.mkdir()
    for r in range(4):
        write(ddp_trace(rank=r, world=4, steps=1500, gemm_us=500 + 10 * r), d / f"rank{r}.pt.trace.json.gz")
    job = _Stoppable(["scale", d, "--to", "all", "-o", out, "--jobs", "2"], how)
    if how == "terminal":
        assert job.term.read_until("summarizing 4 ranks"), job.term.text
    time.sleep(1.0)  # the workers are summarizing their first rank, the next one queued to each
    assert job.proc.poll() is None, "the run ended before the signal: make its ranks longer"
    stopped_at = job.ctrl_c()
    code, text = job.finish()
    took = time.monotonic() - stopped_at
    assert code == 130, text
    assert took < 10, f"it went on {took:.1f} s after the signal"
    assert "aborted: wrote 0 traces before the signal" in text.replace("\r", ""), text
    assert list(out.iterdir()) == [], [p.name for p in out.iterdir()]


# --- item 5: validate refuses different programs ------------------------------------------------------------------

@pytest.mark.slow
def test_issue26_item5_validate_refuses_the_same_ops_on_other_shapes(tmp_path: Path) -> None:
    """GPT-2 against BERT "matched" 808 ops by name (both are stacks of aten::linear, layer_norm, ...) and exit 0.
    A program with the same op names on other shapes is another program."""
    doc = _doc()
    for e in doc["traceEvents"]:
        dims = (e.get("args") or {}).get("Input Dims")
        if isinstance(dims, list):
            e["args"]["Input Dims"] = [[2 * x for x in d] if isinstance(d, list) else d for d in dims]
    other = tmp_path / "other_shapes.json"
    other.write_text(json.dumps(doc))
    res = cli("validate", MLP_FIXTURE, other)
    assert res.returncode == 1 and "run different programs" in res.stderr and "same input shapes" in res.stderr
    assert cli("validate", MLP_FIXTURE, MLP_FIXTURE, "--format", "json").returncode == 0


@needs_shared
def test_issue26_item5_validate_refuses_gpt2_against_bert(tmp_path: Path) -> None:
    pred = tmp_path / "gpt2.h200.pt.trace.json.gz"
    assert cli("scale", TRACES / "h100-sxm" / "gpt2_b8_s1024_amp.pt.trace.json.gz", "--to", "H200",
               "-o", pred).returncode == 0
    res = cli("validate", pred, TRACES / "h200-sxm" / "bert_b32_s128_amp.pt.trace.json.gz")
    assert res.returncode == 1 and "run different programs" in res.stderr, res.stderr
    same = cli("validate", pred, TRACES / "h200-sxm" / "gpt2_b8_s1024_amp.pt.trace.json.gz", "--format", "json")
    assert same.returncode == 0, same.stderr


# --- item 6: check tells the input's violations from ours without the input ----------------------------------------

@pytest.mark.slow
def test_issue26_item6_check_an_output_away_from_its_input(tmp_path: Path) -> None:
    """``check OUT`` failed on the input's own violation (Kineto's "Command Buffer Full" event, pid -1) unless
    --input was given: the output now records its input's violations."""
    doc = _doc()
    first = next(e for e in doc["traceEvents"] if e.get("ph") == "X")
    doc["traceEvents"].append({"ph": "X", "cat": "cuda_driver", "name": "Command Buffer Full", "pid": -1,
                               "tid": -1, "ts": first["ts"], "dur": 1.0})
    src_dir, out_dir = tmp_path / "in", tmp_path / "elsewhere"
    src_dir.mkdir()
    out_dir.mkdir()
    (src_dir / "prof.json").write_text(json.dumps(doc))
    out = out_dir / "l4.pt.trace.json.gz"
    assert cli("scale", src_dir / "prof.json", "--to", "L4", "-o", out).returncode == 0
    assert _header(out)["input_violations"] == {"id-range": [len(doc["traceEvents"]) - 1]}
    res = cli("check", out, "--format", "csv")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "id-range,also in the input" in res.stdout and "not beside" not in res.stderr


@pytest.mark.slow
def test_issue26_item6_an_older_output_without_the_record_still_looks_beside_it(tmp_path: Path) -> None:
    out = tmp_path / "old.json"
    doc = _doc()
    doc["traceEvents"].append({"ph": "X", "name": "bad", "pid": -1, "tid": 1, "ts": 0.0, "dur": 1.0})
    doc["habitat_trace"] = {"input": "gone.json"}  # what an output before issue 26 carried
    out.write_text(json.dumps(doc))
    res = cli("check", out)
    assert res.returncode == 1 and "not beside" in res.stderr


# --- item 7: the precision warning in compare and explain ----------------------------------------------------------

def _bf16(tmp_path: Path) -> Path:
    """The MLP fixture as a bf16 program: bf16 op inputs and bf16 GEMM kernels (a T4 has no bf16 tensor path)."""
    doc = _doc()
    for e in doc["traceEvents"]:
        args = e.get("args") or {}
        if isinstance(args.get("Input type"), list):
            args["Input type"] = ["c10::BFloat16" if t == "float" else t for t in args["Input type"]]
        if e.get("cat") == "kernel" and "gemm" in e.get("name", ""):
            e["name"] = e["name"].replace("f32f32_f32f32_f32", "bf16bf16_bf16f32_bf16")
    path = tmp_path / "bf16.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("command", ["scale", "compare", "explain"])
@pytest.mark.slow
def test_issue26_item7_precision_warning_in_every_command(tmp_path: Path, command: str) -> None:
    src = _bf16(tmp_path)
    extra = ["-o", tmp_path / "t4.json"] if command == "scale" else []
    res = cli(command, src, "--to", "T4", "--format", "json", *extra)
    assert res.returncode == 0, res.stderr
    assert "warning: T4: " in res.stderr and "no bf16 tensor path on T4" in res.stderr, res.stderr
    got = json.loads(res.stdout)
    travels = {"scale": lambda g: g["outputs"][0]["warnings"], "compare": lambda g: g[1]["warnings"],
               "explain": lambda g: g["warnings"]}[command](got)
    assert any("no bf16 tensor path on T4" in w for w in travels)  # the warning travels with the result too


# --- item 8: brackets, the spinner, stray newlines -----------------------------------------------------------------

@pytest.mark.slow
def test_issue26_item8_brackets_are_printed_as_written(tmp_path: Path) -> None:
    doc = _doc()
    for e in doc["traceEvents"]:
        (e.get("args") or {}).pop("Input Dims", None)
    src = tmp_path / "noshapes.json"
    src.write_text(json.dumps(doc))
    res = cli("compare", src, "--to", "L4")
    assert res.returncode == 0, res.stderr
    assert "peak memory: unknown (no [memory] events" in res.stdout, res.stdout


@pytest.mark.parametrize("args", [["scale", MLP_FIXTURE, "--to", "L4", "-o", "OUT"], ["compare", MLP_FIXTURE, "--to",
                                                                                        "L4"]])
@pytest.mark.slow
def test_issue26_item8_spinner_is_cleared_before_the_result(tmp_path: Path, args: list[Any]) -> None:
    args = [tmp_path / "l4.json.gz" if a == "OUT" else a for a in args]
    term = Pty(args, cols=120)
    assert term.finish() == 0, term.text
    raw = term.text
    title = "written:" if args[0] == "scale" else "steady-state iteration"
    spinner = raw.rfind("\x1b[33m0:00:0")  # the spinner's elapsed-time column: its last frame
    assert 0 <= spinner < raw.index(title), raw
    assert "\x1b[2K" in raw[spinner:raw.index(title)], "the spinner's line was not cleared before the result"


@pytest.mark.parametrize("command", ["compare", "explain", "inspect"])
@pytest.mark.slow
def test_issue26_item8_nothing_on_stderr_when_piped(command: str) -> None:
    extra = [] if command == "inspect" else ["--to", "L4"]
    res = cli(command, MLP_FIXTURE, *extra)
    assert res.returncode == 0 and res.stderr == "", repr(res.stderr)


# --- item 9 --------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_issue26_item9_explain_json_has_one_shape(tmp_path: Path) -> None:
    one = json.loads(cli("explain", MLP_FIXTURE, "--to", "L4", "--format", "json", "--top", "2").stdout)
    two = json.loads(cli("explain", MLP_FIXTURE, "--to", "L4,T4", "--format", "json", "--top", "2").stdout)
    assert isinstance(one, dict) and set(one) == set(two) == {"steps", "ops", "kernels", "warnings"}
    assert len(two["steps"]) == 2 * len(one["steps"]) and {r["target"] for r in two["ops"]} == {"L4", "T4"}


@pytest.mark.slow
def test_issue26_item9_repr_counts_kernels_as_inspect_does(tmp_path: Path) -> None:
    doc = _doc()
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    doc["traceEvents"].append({**kernel, "cat": "gpu_memset", "name": "Memset (Device)", "ts": kernel["ts"] + 0.5,
                               "dur": 0.1, "args": {"device": 0, "stream": 99, "correlation": 987654}})
    src = tmp_path / "memset.json"
    src.write_text(json.dumps(doc))
    inspected = json.loads(cli("inspect", src, "--format", "json").stdout)["traces"][0]
    assert (inspected["kernels"], inspected["gpu_events"]) == (134, 135)
    assert "kernels=134, copies_and_sets=1," in repr(habitat_trace.load(src))


@pytest.mark.slow
def test_issue26_item9_prices_take_comma_lists_and_name_compared_gpus() -> None:
    res = cli("compare", MLP_FIXTURE, "--to", "L4,T4", "--price", "L4=0.5,T4=0.3", "--format", "json")
    assert res.returncode == 0, res.stderr
    prices = {r["gpu"]: (r["usd_per_hour"], r["price_source"]) for r in json.loads(res.stdout)}
    assert prices["L4"] == (0.5, "--price") and prices["T4"] == (0.3, "--price")
    res = cli("compare", MLP_FIXTURE, "--to", "L4", "--price", "B300=20")
    assert res.returncode == 2 and "--price B300: not among the GPUs compared" in res.stderr, res.stderr


def test_issue26_item9_hook_writes_the_specs_file_name_only(tmp_path: Path) -> None:
    specs = tmp_path / "private" / "my_gpus.toml"
    specs.parent.mkdir()
    specs.write_text('[gpus."H100-SM64"]\nbase = "H100"\nsms = 64\n')

    class Prof:  # what the handler calls of torch.profiler.profile
        def export_chrome_trace(self, path: str) -> None:
            Path(path).write_bytes(MLP_FIXTURE.read_bytes())

    handler = habitat_trace.tensorboard_trace_handler(tmp_path / "runs", to=["H100-SM64"], worker_name="w",
                                                      specs=specs)
    original, scaled = handler(Prof())
    header = _header(scaled)
    assert header["specs_file"] == "my_gpus.toml" and "private" not in json.dumps(header)

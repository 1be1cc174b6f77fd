"""Issue 33: the rough edges a new user hit. A regression test per numbered item, named for it; each failed on main
96b909a. In-process (``cli.main``) where the shell's view is not the point, so they run in the default set."""
from __future__ import annotations

import gzip
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from habitat_trace.cli import main
from tests.conftest import MLP_FIXTURE, ROOT
from tests.dist_helpers import ddp_trace, write

H100 = "NVIDIA H100 80GB HBM3"


def run(args: list[Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the CLI in this process."""
    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _doc(path: Path = MLP_FIXTURE) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


# --- item 1 --------------------------------------------------------------------------------------------------------

def test_issue33_item1_inspect_dir_of_a_rank_and_a_plain_trace(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """One trace with distributedInfo and one without: exit 70 (Unknown format code 'd' for a float) and the CSV
    said rank 0.0 and 2.0 kernels a step."""
    write(ddp_trace(rank=0, world=2, device=H100), tmp_path / "a.json.gz")
    write(ddp_trace(rank=0, world=2, device=H100, distributed=False), tmp_path / "b.json.gz")
    code, out, err = run(["inspect", tmp_path], capsys)
    assert code == 0, err
    code, out, _ = run(["inspect", tmp_path, "--format", "csv"], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[2].startswith("a.json.gz,0,") and lines[3].startswith("b.json.gz,,")
    steps = lines[lines.index("# steps") + 2:]
    assert steps[0].startswith("a.json.gz,0,0,") and steps[0].endswith(",2")  # kernels of a step: an int
    assert steps[2].startswith("a.json.gz,0,mean,") and steps[2].endswith(",2.0")  # their mean: a float


# --- item 2 --------------------------------------------------------------------------------------------------------

def test_issue33_item2_a_whatif_on_the_origin_gpu_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """--to H100 --interconnect pcie on an H100 trace printed two identical "H100 SXM5 80GB" rows."""
    for whatif, value, named in ((["--interconnect", "pcie"], "pcie", "pcie"),
                                 (["--gpus-per-node", "4", "--nodes", "2"], "4 GPUs a node, 2 nodes", "2 nodes")):
        code, out, err = run(["compare", MLP_FIXTURE, "--to", "H100", *whatif, "--format", "json"], capsys)
        assert code == 0, err
        rows = json.loads(out)
        assert [(r["gpu"], r["origin"], r["whatif"]) for r in rows] == [
            ("H100 SXM5 80GB", True, None), ("H100 SXM5 80GB", False, value)]
        code, out, _ = run(["compare", MLP_FIXTURE, "--to", "H100", *whatif], capsys)
        assert "H100 SXM5 80GB (origin)" in out and f"H100 SXM5 80GB (what-if: {value})" in out and named in out


# --- item 3 --------------------------------------------------------------------------------------------------------

def test_issue33_item3_synthesized_kernels_have_no_waves(capsys: pytest.CaptureFixture[str]) -> None:
    """explain --world-size 2: every synthesized NCCL and copy kernel showed "waves 236.74 -> 236.74, γ 0.80", the
    facts of a default grid no law used."""
    code, out, err = run(["explain", MLP_FIXTURE, "--to", "H100", "--world-size", "2", "--top", "30", "--format",
                          "json"], capsys)
    assert code == 0, err
    kernels = json.loads(out)["kernels"]
    synthesized = [k for k in kernels if k["method"].endswith("-synthesized")]
    assert {k["method"] for k in synthesized} == {"collective-synthesized", "copy-synthesized"}
    assert all(k["waves_origin"] is None and k["waves_target"] is None and k["gamma"] is None for k in synthesized)
    assert {k["bound"] for k in synthesized} == {"communication", "memory"}
    recorded = [k for k in kernels if not k["method"].endswith("-synthesized")]
    assert recorded and all(k["waves_origin"] > 0 and 0 <= k["gamma"] <= 1 for k in recorded)
    code, out, _ = run(["explain", MLP_FIXTURE, "--to", "H100", "--world-size", "2", "--top", "3"], capsys)
    assert "236.74" not in out


# --- item 4 --------------------------------------------------------------------------------------------------------

def test_issue33_item4_check_an_unmodified_profiler_trace(capsys: pytest.CaptureFixture[str]) -> None:
    """check on a torch.profiler trace said "1 violations of ours" (Kineto's pid -1) and exited 1."""
    trace = ROOT / "tests" / "data" / "a100_nccl_step5.json.gz"
    code, out, err = run(["check", trace], capsys)
    assert code == 0, out + err
    assert "of ours" not in out and "violations the trace was recorded with)" in out
    code, out, _ = run(["check", trace, "--format", "json"], capsys)
    assert {r["status"] for r in json.loads(out)} == {"in the recorded trace"}


def test_issue33_item4_check_input_must_be_the_outputs_input(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """check --input pointing at another trace was accepted silently."""
    out_trace = tmp_path / "mlp.a100.pt.trace.json.gz"
    assert run(["scale", MLP_FIXTURE, "--to", "A100", "-o", out_trace], capsys)[0] == 0
    other = ROOT / "tests" / "data" / "a100_nccl_step5.json.gz"
    code, _, err = run(["check", out_trace, "--input", other], capsys)
    assert code == 2 and "was written from mlp_b32_fp32.pt.trace.json.gz, not a100_nccl_step5.json.gz" in err
    renamed = tmp_path / "a100_nccl_step5.json.gz"  # the right name, another trace: its event count differs
    renamed.write_bytes(other.read_bytes())
    doc = _doc(out_trace)
    doc["habitat_trace"]["input"] = renamed.name
    hand = tmp_path / "hand.json"
    hand.write_text(json.dumps(doc))
    code, _, err = run(["check", hand, "--input", renamed], capsys)
    assert code == 2 and "an output keeps every event of the trace it was written from" in err
    assert run(["check", out_trace, "--input", MLP_FIXTURE], capsys)[0] == 0


def test_issue33_item4_quiet_check_prints_no_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-q check printed the violations table: the exit status is the answer, as with grep -q."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"habitat_trace": {"input_violations": {}}, "traceEvents": [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10}]}))
    assert run(["-q", "check", bad], capsys) == (1, "", "")
    code, out, _ = run(["-q", "check", bad, "--format", "json"], capsys)  # asked for: still printed
    assert code == 1 and json.loads(out)[0]["status"] == "error"


# --- item 5 --------------------------------------------------------------------------------------------------------

def test_issue33_item5_a_string_dur_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cpu_op whose dur is the string "12" was read as 12 µs and scaled, and the output broke nesting (check); the
    fuzz found it (tests/test_robust_fuzz.py pins the same example)."""
    doc = _doc()
    assert doc["traceEvents"][4]["cat"] == "cpu_op"
    doc["traceEvents"][4]["dur"] = "12"
    src = tmp_path / "in.pt.trace.json"
    src.write_text(json.dumps(doc))
    code, _, err = run(["scale", src, "--to", "A100", "-o", tmp_path / "out.json"], capsys)
    assert code == 2 and "dur='12'" in err and err.count("\n") == 1
    assert not (tmp_path / "out.json").exists()


# --- item 6 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["inspect"], ["compare", "--to", "A100"], ["explain", "--to", "A100"],
                                     ["scale", "--to", "A100", "-o", "{out}"]])
def test_issue33_item6_one_rule_for_a_directory_with_a_bad_trace(command: list[str], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """inspect DIR and compare DIR stopped at a bad file (exit 2) while scale DIR wrote the rest: every command now
    does the good traces, lists the bad one, and exits with its error."""
    d, out = tmp_path / "traces", tmp_path / "out"
    d.mkdir()
    out.mkdir()
    (d / "good.pt.trace.json.gz").write_bytes(MLP_FIXTURE.read_bytes())
    (d / "bad.json").write_text("{not json")
    name, *options = command
    args = [name, d, *[str(out) if o == "{out}" else o for o in options], "--format", "json"]
    code, stdout, err = run(args, capsys)
    assert code == 2, err
    assert "1 of 2 traces" in err.splitlines()[-1] and "bad.json" in err.splitlines()[-1]
    assert json.loads(stdout)  # the report of the good trace


# --- item 7 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("option", [["--world-size", "-2"], ["--world-size", "2.5"], ["--world-size", "0"],
                                    ["--nodes", "0"], ["--gpus-per-node", "0"], ["--bucket-mb", "0"],
                                    ["--strategy", "zero"], ["--interconnect", "ib"], ["--cpu-speed", "0"],
                                    ["--price", "L4"], ["--format", "xml"], ["--world-size", "2", "--nodes", "3"]])
def test_issue33_item7_every_bad_option_value_is_one_usage_error(option: list[str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--world-size -2 exited 1 and --world-size 2.5 exited 2: a bad option value is a usage error, exit 2."""
    code, out, err = run(["compare", MLP_FIXTURE, "--to", "A100", *option], capsys)
    assert code == 2 and not out, err
    assert option[0] in err


# --- item 8 --------------------------------------------------------------------------------------------------------

def test_issue33_item8_unseen_embedding_tables_make_the_peak_unknown(tmp_path: Path) -> None:
    """DLRM's 8 V100 ranks: "peak GiB 0.0, fits yes" from the MLP's gradients alone; the embedding tables (sparse
    gradients, no AccumulateGrad with their shape) were invisible."""
    from habitat_trace.analysis.memory import peak_memory
    from habitat_trace.ingest import load

    doc = _doc()
    ev = doc["traceEvents"]
    op = next(e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::linear")
    table = {**op, "name": "aten::embedding_bag", "args": {**op["args"], "Input Dims": [[1_000_000, 128], [4096]],
                                                           "Input type": ["float", "long int"]}}
    ev.insert(ev.index(op), table)
    path = tmp_path / "dlrm_like.json"
    path.write_text(json.dumps(doc))
    assert peak_memory(load(path)) == (None, "unknown")
    assert peak_memory(load(MLP_FIXTURE))[1] == "estimate"  # no embedding: the estimate stands
    grads = [e for e in ev if e.get("name") == "torch::autograd::AccumulateGrad"]
    seen = {**grads[0], "args": {**grads[0]["args"], "Input Dims": [[1_000_000, 128]], "Input type": ["float"]}}
    ev.insert(ev.index(grads[0]), seen)  # the table's gradient arrives with its shape: counted, so an estimate
    path.write_text(json.dumps(doc))
    gib, source = peak_memory(load(path))
    assert source == "estimate" and gib > 1_000_000 * 128 * 4 * 4 / 2**30 * 0.99  # weight, grad, 2 Adam states


# --- item 9 --------------------------------------------------------------------------------------------------------

def test_issue33_item9_docs_name_the_catalog_as_it_is() -> None:
    """docs/usage.md said 33 NVIDIA GPUs from P100 to B200; `gpus` listed 52."""
    import re

    from habitat_trace.scale.specs import load_catalog

    specs = load_catalog().specs
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for n, vendor in re.findall(r"\b(\d+) (NVIDIA|AMD)[^.|]{0,20}GPUs", text):
            assert int(n) == sum(s.vendor == vendor.lower() for s in specs), f"{page.name}: {n} {vendor} GPUs"
        for vendor, first, last in re.findall(r"(NVIDIA|AMD Instinct) GPUs from (\S+) to (\S+?)[ ,.]", text) + \
                re.findall(r"(AMD Instinct) (MI\d+) to (MI\d+X?)", text):
            names = [s.name for s in specs if s.vendor == vendor.split()[0].lower()]
            assert any(n.startswith(first) for n in names) and any(n.startswith(last) for n in names), page.name


def test_issue33_item9_plot_axis_ends_near_the_slowest_and_names_the_ranks(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The --plot log axis ran to 10^4 ms for a slowest 528 ms, and a --world-size 4 plot did not say it was 4 ranks."""
    pytest.importorskip("matplotlib")
    import pandas as pd

    from habitat_trace.commands.plot import compare_figure

    ms = [46.13, 41.72, 86.29, 318.07, 528.05, 38.35]  # the README's table
    table = pd.DataFrame({"gpu": list("ABCDEF"), "iteration_ms": ms, "bound": ["gpu"] * 6, "fits_memory": [True] * 6,
                          "usd_per_1k_iterations": [0.1] * 6})
    fig = compare_figure(table, "t")
    low, high = fig.axes[0].get_xlim()
    assert fig.axes[0].get_xscale() == "log" and max(ms) < high <= 2 * max(ms)
    inside = [t for t in fig.axes[0].texts if t.get_ha() == "right"]
    assert [t.get_text() for t in inside] == ["318.1 ms ", "528.0 ms "]  # past the axis' middle: labels inside
    png = tmp_path / "ddp4.png"
    assert run(["compare", MLP_FIXTURE, "--to", "H200", "--world-size", "4", "--plot", png], capsys)[0] == 0
    from habitat_trace.commands import plot as P

    seen: list[str] = []
    original = P.compare_figure
    try:
        P.compare_figure = lambda t, title="": seen.append(title) or original(t, title)  # type: ignore[assignment]
        run(["compare", MLP_FIXTURE, "--to", "H200", "--world-size", "4", "--plot", png], capsys)
    finally:
        P.compare_figure = original  # type: ignore[assignment]
    assert seen == ["mlp_b32_fp32.pt.trace.json.gz: one of 4 DDP ranks"]


# --- item 10 -------------------------------------------------------------------------------------------------------

def test_issue33_item10_a_signal_right_after_the_temp_file_leaves_none(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """test_issue26_item3_ctrl_c_stops_a_directory_at_once once failed on a fresh clone: "a temporary file was left".
    A Ctrl-C landing after mkstemp made the file and before the write's try was in place unwound past the clean-up;
    here the signal lands at that very point, right after the file is created (mkstemp opened it with os.open too)."""
    from habitat_trace.emit import writer

    real_open = os.open

    def open_then_ctrl_c(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, *args, **kwargs)
        if str(path).endswith(".tmp"):
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(10_000))  # bytecodes for the handler to run on
        return fd

    monkeypatch.setattr(os, "open", open_then_ctrl_c)
    out = tmp_path / "out.json"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a shell, whatever ran before
    try:
        with pytest.raises(KeyboardInterrupt):
            writer.write_bytes(b"{}", out)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    monkeypatch.setattr(os, "open", real_open)
    assert writer.write_bytes(b"{}", out).read_bytes() == b"{}"

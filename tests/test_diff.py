"""Diff tests in the style of Perfetto's: a small trace and a command line -> the expected table, as CSV.

The traces are built here (tests/dist_helpers.ddp_trace: two ranks of a DDP step on an H100, a GEMM and an NCCL
all-reduce per step); ``{file}`` is rank 0's trace, ``{dir}`` the directory of both ranks, ``{one}`` a directory
holding rank 0's trace alone; ``{mlp}`` is the one-GPU training step of tests/data (MLP_FIXTURE), for scale-out
(``--world-size``); ``{kineto}`` an unmodified torch.profiler trace (tests/data/a100_nccl_step5.json.gz, with the
rule violations Kineto writes). Each case runs the CLI in that directory and compares its ``--format csv`` output
with tests/data/diff/<case>.csv, byte for byte. The cases cross file and directory inputs with the options every
predicting command takes (--to lists, --cpu-speed, --keep-profiler-overhead, --price, the deployment what-ifs), and
cover every command: check and gpus (its table changes with specs/gpus.toml: regenerate it then) too.

After an intended change of the model or of a table, regenerate the expected files and review their diff:
    HABITAT_UPDATE_DIFF=1 python -m pytest -q tests/test_diff.py
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from habitat_trace.cli import main
from tests.conftest import DATA, MLP_FIXTURE
from tests.dist_helpers import ddp_trace, write

EXPECTED = DATA / "diff"
H100 = "NVIDIA H100 80GB HBM3"
CASES = {
    "compare_file": ["compare", "{file}", "--to", "H200,A100"],
    "compare_dir": ["compare", "{dir}", "--to", "H200,A100"],
    "compare_dir_cpu_speed": ["compare", "{dir}", "--to", "H200", "--cpu-speed", "2"],
    "compare_file_kept_overhead_prices": ["compare", "{file}", "--to", "H200", "--keep-profiler-overhead",
                                          "--price", "H200=3.5,H100=2"],
    "compare_dir_pcie": ["compare", "{dir}", "--to", "H200", "--interconnect", "pcie"],
    "explain_file": ["explain", "{file}", "--to", "H200", "--top", "2"],
    "explain_dir": ["explain", "{dir}", "--to", "H200,A100", "--top", "2"],
    "explain_dir_kept_overhead": ["explain", "{dir}", "--to", "H200", "--top", "1", "--keep-profiler-overhead"],
    "scale_file": ["scale", "{file}", "--to", "H200", "-o", "out/"],
    "scale_dir": ["scale", "{dir}", "--to", "H200,A100", "-o", "out/", "--cpu-speed", "0.5"],
    "inspect_dir": ["inspect", "{dir}", "--top", "2"],
    "validate_file": ["validate", "{file}", "{file}", "--top", "1"],
    "validate_dir": ["validate", "{dir}", "{dir}", "--top", "1"],
    "check_kineto": ["check", "{kineto}"],
    "gpus": ["gpus"],
    # scale-out from one GPU (issue 27): DDP on one node, FSDP over two nodes, DDP's bucket cap, explain's tables
    "compare_mlp_ddp8": ["compare", "{mlp}", "--to", "H200", "--world-size", "8"],
    "compare_mlp_fsdp16_two_nodes": ["compare", "{mlp}", "--to", "H200", "--world-size", "16", "--strategy", "fsdp",
                                     "--gpus-per-node", "8"],
    "scale_mlp_ddp4_small_buckets": ["scale", "{mlp}", "--to", "H200", "--world-size", "4", "--bucket-mb", "0.25",
                                     "-o", "out/"],
    "explain_mlp_fsdp4": ["explain", "{mlp}", "--to", "H200", "--top", "2", "--world-size", "4", "--strategy", "fsdp"],
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "ranks").mkdir()
    (tmp_path / "one").mkdir()
    (tmp_path / "out").mkdir()
    for r in range(2):
        doc = ddp_trace(rank=r, world=2, device=H100, gemm_us=500 + 150 * r)
        write(doc, tmp_path / "ranks" / f"rank{r}.pt.trace.json.gz")
    write(ddp_trace(rank=0, world=2, device=H100, gemm_us=500), tmp_path / "one" / "rank0.pt.trace.json.gz")
    write(ddp_trace(rank=0, world=2, device=H100, gemm_us=500), tmp_path / "rank0.pt.trace.json.gz")
    shutil.copyfile(MLP_FIXTURE, tmp_path / "mlp.pt.trace.json.gz")
    shutil.copyfile(DATA / "a100_nccl_step5.json.gz", tmp_path / "kineto.json.gz")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def csv_of(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    names = {"{file}": "rank0.pt.trace.json.gz", "{dir}": "ranks", "{one}": "one", "{mlp}": "mlp.pt.trace.json.gz",
             "{kineto}": "kineto.json.gz"}
    main([names.get(a, a) for a in args] + ["--format", "csv"])
    return capsys.readouterr().out


@pytest.mark.parametrize("case", sorted(CASES))
def test_diff(case: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = csv_of(CASES[case], capsys)
    path = EXPECTED / f"{case}.csv"
    if os.environ.get("HABITAT_UPDATE_DIFF"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
    assert got == path.read_text(), f"{case}: the table changed; if intended, regenerate (module doc)"


@pytest.mark.parametrize("command", [["compare", "--to", "H200,A100"], ["explain", "--to", "H200", "--top", "3"],
                                     ["inspect"]])
def test_a_directory_of_one_trace_is_the_trace(command: list[str], workdir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A single file is a directory of one rank: the same table, whichever way it is given."""
    cmd, *options = command
    from_file = csv_of([cmd, "{file}", *options], capsys)
    from_dir = csv_of([cmd, "{one}", *options], capsys)
    assert from_dir == from_file.replace("rank0.pt.trace.json.gz", "one/rank0.pt.trace.json.gz")

"""The README (and the docs pages a user follows) as a test: every ```bash command and ```python snippet is run,
every link resolves (the generated tables and the figure: benchmarks/tests/test_readme_figures.py).

Each block runs in a fresh temporary directory holding ``prof.pt.trace.json.gz`` (the MLP fixture of tests/data,
standing in for the user's trace) and ``a100.pt.trace.json.gz`` (the README's main job run on it). ``habitat-trace``
there is this checkout's CLI. Blocks naming ``../shared`` skip when it is absent; lines starting with a NOT_RUN
prefix are not run, for the reason given.
"""
from __future__ import annotations

import gzip
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import habitat_trace
from tests.conftest import MLP_FIXTURE, ROOT, SHARED, TRACES, assert_perfetto_ok, viewer

README = ROOT / "README.md"
PAGES = (README, ROOT / "docs" / "usage.md", ROOT / "docs" / "accuracy.md")  # pages whose blocks are run
README_MAX_LINES = 250  # issue 15: a user's page, not a lab notebook
NOT_RUN = {  # a command line starting with this is not run here; why, and what runs it instead
    "pip install": "installs packages: .ci/run runs the set-up install in a fresh venv",
    "python -m pytest": "the test suite itself: .ci/run runs it",
    "tensorboard ": "starts a server: tests/test_hook.py loads the hook's output with torch-tb-profiler",
}
FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<code>.*?)^```$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}:{self.lang}"


def blocks(page: Path, langs: tuple[str, ...] = ("bash", "python")) -> list[Block]:
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start()) + 1, m["lang"], m["code"]) for m in FENCE.finditer(text)
            if m["lang"] in langs]


def section(page: Path, heading: str) -> str:
    """The body of ``## heading`` up to the next ``## `` heading."""
    text = page.read_text()
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def command_lines(code: str) -> list[str]:
    """A bash block's commands: continuations joined, comments and blank lines dropped (heredoc bodies kept)."""
    joined = code.replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def not_run(line: str) -> str | None:
    return next((p for p in NOT_RUN if line.startswith(p)), None)


ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]


@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``habitat-trace`` on PATH that runs this checkout (not whatever an older install put in the venv)."""
    d = tmp_path_factory.mktemp("bin")
    exe = d / "habitat-trace"
    exe.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m habitat_trace \"$@\"\n")
    exe.chmod(0o755)
    return d


def run_bash(code: str, cwd: Path, bin_dir: Path) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    script = code.replace("../shared/", f"{SHARED}/")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="session")
def main_job_output(tmp_path_factory: pytest.TempPathFactory, bin_dir: Path) -> Path:
    """The README's main job, run on the fixture: the ``a100.pt.trace.json.gz`` later blocks read."""
    d = tmp_path_factory.mktemp("main_job")
    shutil.copy(MLP_FIXTURE, d / "prof.pt.trace.json.gz")
    [job] = [b for b in blocks(README, ("bash",)) if b.code in section(README, "Main job")]
    out = run_bash(job.code, d, bin_dir)
    assert out.returncode == 0, out.stderr
    return d / "a100.pt.trace.json.gz"


@pytest.fixture
def workdir(tmp_path: Path, main_job_output: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(MLP_FIXTURE, tmp_path / "prof.pt.trace.json.gz")
    shutil.copy(main_job_output, tmp_path / "a100.pt.trace.json.gz")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _skip_unless_runnable(block: Block) -> None:
    if "../shared" in block.code and not TRACES.is_dir():
        pytest.skip("../shared data is absent")
    if block.lang == "python":
        if re.search(r"^import torch|^from torch", block.code, re.M):
            pytest.importorskip("torch")
        if "from hta" in block.code:
            viewer("hta", "HolisticTraceAnalysis")


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.id)
@pytest.mark.slow
def test_block_runs(block: Block, workdir: Path, bin_dir: Path, capsys: pytest.CaptureFixture) -> None:
    _skip_unless_runnable(block)
    if block.lang == "python":
        exec(compile(block.code, f"{block.id}", "exec"), {"__name__": "__readme__"})
        return
    lines = [line for line in command_lines(block.code) if not not_run(line)]
    if not lines:
        pytest.skip("; ".join(sorted({NOT_RUN[not_run(x)] for x in command_lines(block.code)})))  # type: ignore[index]
    out = run_bash(block.code if len(lines) == len(command_lines(block.code)) else "\n".join(lines), workdir, bin_dir)
    assert out.returncode == 0, f"{block.id} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"


def test_every_command_line_runs_or_says_why_not() -> None:
    """Only the NOT_RUN prefixes are left out, and each is still used (the list cannot rot)."""
    lines = [line for b in ALL_BLOCKS if b.lang == "bash" for line in command_lines(b.code)]
    used = {not_run(line) for line in lines} - {None}
    assert used == set(NOT_RUN), f"NOT_RUN entries no page uses: {set(NOT_RUN) - used}"


def _python_block(page: Path, marker: str) -> Block:
    [block] = [b for b in blocks(page, ("python",)) if marker in b.code]
    return block


@pytest.mark.slow
def test_api_snippet_writes_an_a100_trace_and_prints_what_it_says(workdir: Path, capsys) -> None:
    block = _python_block(README, 'trace.scale(to="A100")')
    exec(compile(block.code, block.id, "exec"), {})
    out = workdir / "prof.a100.pt.trace.json.gz"
    assert habitat_trace.load(out).gpu == "A100 SXM4 80GB"  # deviceProperties name the target
    assert_perfetto_ok(out, MLP_FIXTURE)
    shown = re.search(r"print\(trace\)\s+# (.*)", block.code)[1]  # type: ignore[index]
    assert capsys.readouterr().out.splitlines()[0] == shown


@pytest.mark.slow
def test_record_snippet_exports_a_gzipped_trace(workdir: Path) -> None:
    pytest.importorskip("torch")
    (workdir / "prof.pt.trace.json.gz").unlink()
    block = _python_block(README, "export_chrome_trace")
    exec(compile(block.code, block.id, "exec"), {})
    assert b"traceEvents" in gzip.decompress((workdir / "prof.pt.trace.json.gz").read_bytes())


@pytest.mark.slow
def test_hook_snippet_on_cpu(workdir: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this test pins the CPU path")
    from tests.test_hook import STAMPED

    block = _python_block(ROOT / "docs" / "usage.md", "tensorboard_trace_handler")
    exec(compile(block.code, block.id, "exec"), {})
    [original] = (workdir / "runs" / "mlp").iterdir()  # no CUDA: no scaled copies
    assert STAMPED.match(original.name)


def test_hta_snippet_reads_the_main_jobs_output(workdir: Path, capsys) -> None:
    viewer("hta", "HolisticTraceAnalysis")
    block = _python_block(ROOT / "docs" / "usage.md", "from hta")
    exec(compile(block.code, block.id, "exec"), {})
    assert "compute_time" in capsys.readouterr().out


# --- what the README promises about set-up, CI and its own size ---------------------------------------------

def test_set_up_is_install_and_test_and_ci_runs_both() -> None:
    [setup] = [b for b in blocks(README, ("bash",)) if b.code in section(README, "Set up")]
    install, test = command_lines(setup.code)
    assert shlex.split(install.split("#")[0]) == ["pip", "install", "-e", ".[test]"]
    assert shlex.split(test.split("#")[0]) == ["python", "-m", "pytest", "-q"]
    assert "`pip install .`" in section(README, "Set up")  # the minimal install is named
    ci = [_words(line) for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip()]

    def in_ci(cmd: str) -> bool:  # cmd's words appear, in order, in one line of .ci/run
        words = shlex.split(cmd.split("#")[0])
        return any(_subsequence(words, line) for line in ci)

    assert in_ci(install) and in_ci(test)


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:  # a shell line shlex cannot split (e.g. nested quotes in $(...)): not a command we look for
        return []


def _subsequence(words: list[str], line: list[str]) -> bool:
    it = iter(line)
    return all(w in it for w in words)


def test_main_job_is_the_documented_command() -> None:
    [job] = [b for b in blocks(README, ("bash",)) if b.code in section(README, "Main job")]
    assert command_lines(job.code) == ["habitat-trace scale prof.pt.trace.json.gz --to A100 -o a100.pt.trace.json.gz"]


def test_readme_fits_its_budget() -> None:
    assert len(README.read_text().splitlines()) <= README_MAX_LINES


def test_inline_commands_name_real_subcommands_and_options() -> None:
    """`habitat-trace SUB --opt` spans in the prose: SUB exists and takes --opt (the CLI cannot drift from them)."""
    import typer.main

    from habitat_trace.cli import app

    cli = typer.main.get_command(app)
    spans = [s for page in PAGES for s in re.findall(r"`(habitat-trace [^`]+)`", page.read_text())]
    assert spans
    for span in spans:
        words = span.split()
        if words[1] in ("--help", "-h"):
            continue
        assert words[1] in cli.commands, span  # type: ignore[attr-defined]
        options = {o for p in cli.commands[words[1]].params for o in p.opts}  # type: ignore[attr-defined]
        assert {w.split("=")[0] for w in words[2:] if w.startswith("--")} <= options | {"--help"}, span


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    for link in LINK.findall(page.read_text()):
        if re.match(r"\w+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{page.name}: {link} does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.*)$", target.read_text(), re.M)
            assert anchor in {_anchor(h) for h in headings}, f"{page.name}: no heading for #{anchor} in {target.name}"

"""What ``python -m pytest`` runs: by default the package's tests (tests/) but those marked ``slow`` (hypothesis at full
size, mypy, the CLI as a process, real traces) or ``shared`` (they read ../shared), under 2 minutes on 2 CPUs;
``--all`` adds them and the tests of the benchmark scripts (benchmarks/tests), as CI does (.ci/run). Here, at the
repository root, so that ``--all`` is known whichever folder or file is named on the command line."""
from __future__ import annotations

from pathlib import Path

import pytest

BENCHMARK_TESTS = Path(__file__).resolve().parent / "benchmarks" / "tests"
LEFT_OUT = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all", action="store_true", default=False,
                     help="also run the slow tests and benchmarks/tests (CI does: .ci/run)")


def left_out(item: pytest.Item) -> bool:
    """A test the default run leaves out: marked slow or shared, or a test of the benchmark scripts."""
    marked = any(item.get_closest_marker(m) is not None for m in ("slow", "shared"))
    return marked or BENCHMARK_TESTS in Path(item.path).parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--all") or config.getoption("markexpr"):  # -m chooses for itself
        return
    out = [i for i in items if left_out(i)]
    config.stash[LEFT_OUT] = len(out)
    if out:
        config.hook.pytest_deselected(items=out)
        items[:] = [i for i in items if not left_out(i)]


@pytest.hookimpl(tryfirst=True)  # before fixtures are set up (a module fixture may read the folder)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.shared(FOLDER)`` (tests/conftest.py: needs_shared, needs_external): skipped where FOLDER is
    absent, as on a plain clone."""
    for mark in item.iter_markers("shared"):
        folder = Path(mark.args[0])
        if not folder.is_dir():
            pytest.skip(f"{folder} is absent (../shared data, not in the repository)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    n = config.stash.get(LEFT_OUT, 0)
    if n:
        terminalreporter.write_line(f"{n} slow, ../shared and benchmarks/ tests left out: --all runs them (CI does)")

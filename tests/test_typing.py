"""mypy with --disallow-untyped-defs on habitat_trace/ (settings in pyproject.toml [tool.mypy]) passes: the
typed boundaries of issue 15 stay typed. Runs in CI (mypy is in the test extra); skips only outside CI when
mypy is not installed."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None and not os.environ.get("CI"),
                    reason="mypy not installed (pip install -e '.[test]')")
@pytest.mark.slow
def test_mypy_disallow_untyped_defs_passes() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

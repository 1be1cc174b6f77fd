"""Shared test set-up: the deterministic hypothesis profile for CI and the ../shared data location."""
from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SHARED = Path(os.environ.get("HABITAT_SHARED", ROOT.parent / "shared"))
TRACES = SHARED / "data" / "traces"
EXTERNAL = SHARED / "data" / "external-traces"

# Reads a folder of ../shared: skipped where it is absent, and left out of the default run with the slow tests (both:
# conftest.py at the root; --all runs them): with ../shared the default run took 20 min (issue 33).
needs_shared = pytest.mark.shared(TRACES)

needs_external = pytest.mark.shared(EXTERNAL)
MLP_FIXTURE = DATA / "mlp_b32_fp32.pt.trace.json.gz"  # tests/data/README.md says where it comes from


def viewer(module: str, package: str) -> Any:
    """Import a trace viewer (``hta``, ``torch_tb_profiler``) for a loading test.

    Skips, with the reason, only when it is not installed and ``CI`` is unset: under CI a missing viewer
    fails the test, and so does one that is installed but cannot be imported (a broken install).
    """
    if importlib.util.find_spec(module) is None and not os.environ.get("CI"):
        pytest.skip(f"{package} is not installed (pip install '.[test]'); CI runs this test")
    if module == "hta":
        os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")  # keep Kineto's ns; must precede the import
    return importlib.import_module(module)


def assert_perfetto_ok(output: Path | str, original: Path | str | None = None) -> None:
    """Perfetto's JSON-import rules (habitat_trace.ingest.rules) on a trace a test wrote.

    With ``original``, violations the original already had are allowed (real Kineto traces have some);
    without it, the output must have none.
    """
    from habitat_trace.ingest.reader import read_document
    from habitat_trace.ingest.rules import check_events

    events = read_document(Path(output))["traceEvents"]
    if original is None:
        errors = check_events(events)
    else:
        errors, _ = new_violations(read_document(Path(original))["traceEvents"], events)
    assert errors == [], f"{output}: " + "; ".join(map(str, errors[:5]))


def new_violations(original: Any, output: Any) -> tuple[list[Any], list[Any]]:
    """(errors, warnings): the Perfetto-rule violations of ``output`` its ``original`` did not have, and those it
    had (events keep their index in our outputs)."""
    from habitat_trace.ingest import rules

    return rules.split(rules.check_events(output), rules.by_rule(rules.check_events(original)))


def imports_torch(code: str) -> bool:
    """Run ``code`` in a fresh interpreter from the repository root; True when it left torch imported (the
    scale path must not import torch: start-up time, machines without CUDA)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print('torch' in sys.modules)"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"


def benchmark_module(path: str) -> Any:
    """A benchmark script (``benchmarks/...py``, a path under the repository) imported as a module, for tests of what
    it computes."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

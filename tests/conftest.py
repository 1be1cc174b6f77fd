"""Shared test set-up: the deterministic hypothesis profile for CI and the ../shared data location."""
from __future__ import annotations

import os
from pathlib import Path

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

needs_shared = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared data is absent")

needs_external = pytest.mark.skipif(not EXTERNAL.is_dir(), reason="../shared external traces are absent")
MLP_FIXTURE = DATA / "mlp_b32_fp32.pt.trace.json.gz"  # tests/data/README.md says where it comes from

"""Done-when of issue 17 as a regression guard: our H100 traces of NeuSight's end-to-end workloads scaled to the dev
GPUs (V100, T4, P100, P4) reach a mean drift-free error <= 12% against NeuSight's published latencies, and the
held-out GPUs are predicted without touching any label (benchmarks/neusight_e2e.py)."""
from __future__ import annotations


import pytest

from tests.conftest import SHARED, benchmark_module

E2E = SHARED / "data" / "neusight-e2e"
needs_e2e = pytest.mark.skipif(not (E2E / "labels_dev.csv").is_file(), reason="../shared/data/neusight-e2e is absent")
MEAN_ERROR_BOUND_PCT = 12.0  # issue 17: mean drift-free error <= 12% on the dev GPUs (10.5% measured 2026-11-23)
BEFORE_PCT = 31.4  # the wave law with datasheet per-SM peaks, same cells
# Issue 32's bar (<= 8%), met on the dev cells since the T4 takes its public SGEMM rate (2026-12-06: 6.5%, T4 6.3% with
# +0.4% bias; 9.2% and T4 +19.6% on its per-kernel sweep's 3.36 TFLOP/s). Pinned: all cells <= 8%, T4 <= 10% and
# unbiased within 5% (a catalog T4 back at the sweep's rate fails it).
ISSUE_32_BOUND_PCT, T4_BOUND_PCT, T4_BIAS_PCT = 8.0, 10.0, 5.0


def _bench():
    return benchmark_module("benchmarks/neusight_e2e.py")


class _GuardedLabels(dict):
    """Labels that fail the test when a held-out GPU's label is looked up."""

    heldout: tuple[str, ...] = ()

    def __getitem__(self, key):
        assert key[0] not in self.heldout, f"read a held-out label: {key}"
        return super().__getitem__(key)

    def __contains__(self, key):
        assert key[0] not in self.heldout, f"looked for a held-out label: {key}"
        return super().__contains__(key)


@pytest.fixture(scope="module")
def result():
    mod = _bench()
    read = mod.read_labels

    def guarded(folder):
        labels = _GuardedLabels(read(folder))
        labels.heldout = tuple(mod.HELDOUT_GPUS)
        return labels

    mod.read_labels = guarded
    return mod.run(SHARED, heldout=True)


@needs_e2e
@pytest.mark.slow
def test_dev_gpus_mean_error_within_bound(result) -> None:
    rows, _ = result
    assert len(rows) == 24 and {r["gpu"] for r in rows} == {"V100 PCIe 32GB", "T4", "P100 PCIe 16GB", "P4"}
    mean = sum(abs(r["error_pct"]) for r in rows) / len(rows)
    assert mean <= MEAN_ERROR_BOUND_PCT < BEFORE_PCT


@needs_e2e
@pytest.mark.slow
def test_heldout_predicted_without_labels(result) -> None:
    _, held = result
    assert len(held) == 18 * 3
    assert all("label_ms" not in r and r["predicted_ms"] > 0 for r in held)


@needs_e2e
@pytest.mark.slow
def test_issue_32_bar_and_the_t4_on_its_public_rate(result) -> None:
    rows, _ = result
    assert sum(abs(r["error_pct"]) for r in rows) / len(rows) <= ISSUE_32_BOUND_PCT
    t4 = [r["error_pct"] for r in rows if r["gpu"] == "T4"]
    assert len(t4) == 5
    assert sum(map(abs, t4)) / len(t4) <= T4_BOUND_PCT and abs(sum(t4) / len(t4)) <= T4_BIAS_PCT

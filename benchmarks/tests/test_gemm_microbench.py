"""CPU checks of benchmarks/collect/gemm_microbench.py's NeuSight mode (issue 32): its ops keep NeuSight's dimension
order, its estimator is NeuSight's, and a call's kernel time is the median of the profiled calls' summed kernels."""
from __future__ import annotations

import math
import sys

import pytest

from tests.conftest import ROOT

torch = pytest.importorskip("torch")
sys.path.insert(0, str(ROOT / "benchmarks" / "collect"))
import gemm_microbench as G  # noqa: E402


@pytest.mark.parametrize("op", ["bmm", "linear"])
def test_neusight_ops_reduce_over_n_and_output_k(op: str) -> None:
    """NeuSight's (B, M, N, K): bmm(randn(B, M, N), randn(B, N, K)), nn.Linear(N, K) on randn(B, M, N)
    (neusight/Dataset/collect.py); the set of 2026-11-26 had timed the GEMM with N and K swapped."""
    out = G.neusight_call(op, 3, 5, 7, 11, device="cpu")()
    assert tuple(out.shape) == (3, 5, 11)


def test_neusight_estimator_is_the_mean_of_the_five_fastest_of_25(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(G, "event_times_ms", lambda call, n: calls.append(n) or [float(i) for i in range(n, 0, -1)])
    assert G.neusight_time_ms(lambda: None) == pytest.approx(3.0)  # mean of 1..5
    assert calls == [25]


def test_kernel_time_is_the_median_call_of_summed_kernels() -> None:
    ks = [{"dur": d} for d in (3.0, 1.0, 4.0, 1.0, 5.0, 1.0, 3.0, 1.0, 30.0, 1.0)]  # 5 calls of 2 kernels (us)
    assert G.kernel_time_ms(ks, 5) == pytest.approx(0.005)  # calls of 4, 5, 6, 4, 31 us
    assert math.isnan(G.kernel_time_ms(ks[:-1], 5))  # calls that launched different kernel counts: no time

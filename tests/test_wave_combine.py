"""Properties of ``wave.combine`` (docs/method.md step 5): the additive law when no FLOP share is known,
the roofline overlap when it is, never faster than either side's share, monotone in both factors."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.scale import wave

share = st.floats(0.0, 1.0)
factor = st.floats(0.05, 20.0)


@given(share, factor, factor)
def test_without_flop_share_the_law_is_additive(g: float, fm: float, fc: float) -> None:
    got = wave.combine(np.array([1000.0]), np.array([g]), np.array([fm]), np.array([fc]))[0]
    assert np.isclose(got, 1000.0 * (g * fm + (1 - g) * fc))


@given(share, share, factor, factor)
def test_overlap_is_bounded_by_each_side_and_by_the_serial_sum(g: float, u: float, fm: float, fc: float) -> None:
    t = wave.combine(np.array([1.0]), np.array([g]), np.array([fm]), np.array([fc]), np.array([u]))[0]
    assert t >= max(g * fm, u * fc) - 1e-12  # neither the DRAM nor the math share shrinks
    assert t <= g * fm + (1 - g) * fc + u * fc + 1e-12


@given(share, share, factor, factor, st.floats(1.0, 4.0))
def test_overlap_is_monotone_in_both_factors(g: float, u: float, fm: float, fc: float, k: float) -> None:
    base = wave.combine(np.array([1.0]), np.array([g]), np.array([fm]), np.array([fc]), np.array([u]))[0]
    more_m = wave.combine(np.array([1.0]), np.array([g]), np.array([fm * k]), np.array([fc]), np.array([u]))[0]
    more_c = wave.combine(np.array([1.0]), np.array([g]), np.array([fm]), np.array([fc * k]), np.array([u]))[0]
    assert more_m >= base - 1e-12 and more_c >= base - 1e-12


def test_compute_bound_gemm_gains_nothing_from_bandwidth_and_slows_by_the_sm_ratio() -> None:
    """A GEMM at half the DRAM bandwidth and 70% of its math peak: twice the bandwidth does not help
    (the loads already hide under the MMAs), half the SMs cost the full factor 2."""
    t = np.array([100.0]); g = np.array([0.5]); u = np.array([0.7])
    assert wave.combine(t, g, np.array([0.5]), np.array([1.0]), u)[0] == 100.0
    assert wave.combine(t, g, np.array([1.0]), np.array([2.0]), u)[0] == 200.0
    # the additive law would have predicted 75 and 150
    assert wave.combine(t, g, np.array([0.5]), np.array([1.0]))[0] == 75.0


def test_identity_factors_keep_the_time() -> None:
    t = np.array([123.0, 5.0]); one = np.ones(2)
    assert np.allclose(wave.combine(t, np.array([0.3, 1.0]), one, one, np.array([0.9, 0.0])), t)

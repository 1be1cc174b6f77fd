"""benchmarks/collect/clock_under_load.py's summary of nvidia-smi samples (the part that runs without a GPU): the ramp
is left out, the clock's median and deciles and the throttle reasons are those of the phase's samples alone."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")
import clock_under_load as C  # noqa: E402


def _row(phase: str, wall: float, mhz: float, watts: float = 600.0, reasons: str = "0x0") -> dict[str, str]:
    return {"t": "", "sm_mhz": f"{mhz:g}", "max_mhz": "1980", "power_w": f"{watts:g}", "limit_w": "700.00",
            "reasons": reasons, "temp_c": "50", "phase": phase, "wall": f"{wall:.3f}"}


def test_summary_leaves_the_ramp_and_other_phases_out() -> None:
    t0 = 1000.0
    rows = [_row("bf16", t0 + 0.1 * i, 1980.0) for i in range(int(C.RAMP_S * 10))]  # the ramp: at boost
    rows += [_row("bf16", t0 + C.RAMP_S + 0.1 * i, 1300.0 + i, 698.0, "0x4") for i in range(50)]
    rows += [_row("idle", t0 + 9.0, 345.0, 70.0)]
    s = C.summarize(rows, "bf16", t0)
    assert s["samples"] == 50
    assert s["sm_mhz_median"] == pytest.approx(1324.5)
    assert 1300.0 <= s["sm_mhz_p10"] < s["sm_mhz_median"] < s["sm_mhz_p90"] <= 1349.0
    assert s["power_w_median"] == 698.0 and s["reasons"] == "0x4" and s["max_sm_mhz"] == "1980"


def test_summary_of_a_phase_without_samples_says_so() -> None:
    assert C.summarize([_row("idle", 0.0, 345.0)], "bf16", 0.0) == {"samples": 0}

"""Every public trace in ../shared/data/external-traces scales to A100 or fails clearly (issue 8: a test
per file). Outcomes come from reading each file (SOURCES.md): CPU-only traces are refused with exit code 3; the rest scale, re-ingest with the same kernels and break no Perfetto rule the input kept."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from habitat_trace.cli import main
from tests.conftest import new_violations
from habitat_trace.errors import UnsupportedTraceError
from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.ingest.reader import read_document
from tests.conftest import EXTERNAL, needs_external

# file -> None when it scales, else (exit code, words the one error line must contain)
EXPECTED: dict[str, tuple[int, tuple[str, ...]] | None] = {
    "a100_cuda_event_sync.json.gz": None,
    "a100_nccl.json.gz": None,
    "a100_triton.json.gz": None,
    "amd_mi250_minitoy_rocm6.json.gz": None,  # ROCm: scales since issue 20 (cross-vendor rules)
    "cpu_only.pt.trace.json.gz": (UnsupportedTraceError.exit_code, ("no GPU kernels", "ProfilerActivity.CUDA")),
    "v100_resnet50_2021_tbplugin.pt.trace.json.gz": None,
    "v100_resnet_ns_resolution.pt.trace.json.gz": None,
}
FASTER_ON_A100 = ("v100_resnet50_2021_tbplugin.pt.trace.json.gz", "v100_resnet_ns_resolution.pt.trace.json.gz")


@needs_external
def test_every_external_file_has_an_expectation() -> None:
    assert {p.name for p in EXTERNAL.glob("*.gz")} == set(EXPECTED)


@needs_external
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_external_trace_scales_to_a100_or_fails_clearly(name: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    src, out = EXTERNAL / name, tmp_path / "out.pt.trace.json"
    expected = EXPECTED[name]
    if expected is not None:
        with pytest.raises(SystemExit) as info:
            main(["scale", str(src), "--to", "A100", "-o", str(out)])
        _, err = capsys.readouterr()
        assert info.value.code == expected[0]
        assert err.startswith(f"error: {src}") and err.count("\n") == 1, err
        assert all(w in err for w in expected[1]), err
        assert list(tmp_path.iterdir()) == []
        return
    main(["scale", str(src), "--to", "A100", "-o", str(out)])
    before, after = load(src), load(out)
    kernels = before.gpu[S.CAT] == S.CAT_KERNEL
    assert (after.gpu[S.CAT] == S.CAT_KERNEL).sum() == kernels.sum() > 0
    assert (after.gpu[S.DUR] > 0).all()
    errors, _ = new_violations(read_document(src)["traceEvents"], json.loads(out.read_text())["traceEvents"])
    assert errors == [], [str(v) for v in errors[:5]]
    if name in FASTER_ON_A100:
        assert after.gpu[S.DUR][kernels.to_numpy()].sum() < before.gpu[S.DUR][kernels].sum()


def test_check_tolerates_double_rounding_at_epoch_timestamps() -> None:
    """Regression (the two V100 traces): ends equal in ns read as crossing by ~0.2 µs once ts is ~1.7e15 µs;
    a real crossing by a µs still counts."""
    from habitat_trace.ingest.rules import check_events

    t0 = 1712195495634045.795
    ann = {"ph": "X", "pid": 0, "tid": 7, "ts": t0, "dur": 18455.591, "name": "a"}
    k_ts = 1712195495652496.505
    kernel = {"ph": "X", "pid": 0, "tid": 7, "ts": k_ts, "dur": round(t0 + 18455.591 - k_ts, 3), "name": "k"}
    assert check_events([ann, kernel]) == []
    assert [v.rule for v in check_events([ann, dict(kernel, dur=kernel["dur"] + 1.0)])] == ["nesting"]

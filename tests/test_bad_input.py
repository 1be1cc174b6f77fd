"""Bad-input battery (issues 2 and 8, ingest side): each case gives one ``error:`` line naming the
file and the fix, a non-zero exit code, and no traceback. Bad files are built in tmp_path."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from habitat_trace.cli import main
from habitat_trace.errors import TraceFormatError, UnsupportedTraceError
from tests.conftest import MLP_FIXTURE, ROOT


def _events() -> list[dict]:
    return json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))["traceEvents"]


def _with_kernel(change: dict) -> Callable[[Path], None]:
    def write(p: Path) -> None:
        doc = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
        kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
        kernel.update(change)
        p.write_text(json.dumps(doc))  # stdlib json writes NaN as a bare NaN token, like Python exporters
    return write


def _cpu_only(p: Path) -> None:
    gpu = ("kernel", "gpu_memcpy", "gpu_memset")
    p.write_text(json.dumps({"traceEvents": [e for e in _events() if e.get("cat") not in gpu]}))


# name -> (writer of the bad file or None for "absent", error class, words the message must contain)
CASES: dict[str, tuple[Callable[[Path], None] | None, type, tuple[str, ...]]] = {
    "missing": (None, TraceFormatError, ("no such file",)),
    "empty": (lambda p: p.write_bytes(b""), TraceFormatError, ("empty", "torch.profiler")),
    "truncated_json": (lambda p: p.write_bytes(gzip.decompress(MLP_FIXTURE.read_bytes())[:5000]),
                       TraceFormatError, ("truncated", "export")),
    "truncated_gzip": (lambda p: p.write_bytes(MLP_FIXTURE.read_bytes()[:4000]), TraceFormatError,
                       ("gzip", "truncated")),
    "binary_garbage": (lambda p: p.write_bytes(bytes(range(256)) * 40), TraceFormatError, ("binary data, not JSON",)),
    "json_object": (lambda p: p.write_text('{"hello": 1}'), TraceFormatError, ("not a Chrome trace",)),
    "json_list": (lambda p: p.write_text("[1, 2, 3]"), TraceFormatError, ("no trace events",)),
    "json_number": (lambda p: p.write_text("42"), TraceFormatError, ("not a Chrome trace",)),
    "no_events": (lambda p: p.write_text('{"traceEvents": []}'), TraceFormatError, ("empty",)),
    "cpu_only": (_cpu_only, UnsupportedTraceError, ("no GPU kernels", "ProfilerActivity.CUDA")),
    "negative_dur": (_with_kernel({"dur": -3.5}), TraceFormatError, ("dur=-3.5", "dur >= 0")),
    "nan_dur": (_with_kernel({"dur": float("nan")}), TraceFormatError, ("dur=nan", "finite")),
    "string_dur": (_with_kernel({"dur": "soon"}), TraceFormatError, ("dur='soon'",)),
    "directory": (lambda p: p.mkdir(), TraceFormatError, ("directory",)),
}


def _bad_file(tmp_path: Path, case: str) -> Path:
    path = tmp_path / f"{case}.pt.trace.json"
    writer = CASES[case][0]
    if writer is not None:
        writer(path)
    return path


@pytest.mark.parametrize("case", CASES)
@pytest.mark.slow
def test_bad_input_is_one_error_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _bad_file(tmp_path, case)
    _, cls, words = CASES[case]
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", str(path)])
    out, err = capsys.readouterr()
    assert exit_info.value.code == cls.exit_code != 0
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert str(path) in err
    for w in words:
        assert w in err, err


@pytest.mark.parametrize("case", ["truncated_gzip", "nan_dur", "cpu_only"])
@pytest.mark.slow
def test_bad_input_through_the_real_entry_point(case: str, tmp_path: Path) -> None:
    """The console script path: a fresh interpreter, stderr is one line, no traceback."""
    path = _bad_file(tmp_path, case)
    r = subprocess.run([sys.executable, "-m", "habitat_trace", "inspect", str(path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == CASES[case][1].exit_code
    assert r.stdout == ""
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_input_file_is_untouched(tmp_path: Path) -> None:
    path = _bad_file(tmp_path, "negative_dur")
    before = path.read_bytes()
    with pytest.raises(SystemExit):
        main(["inspect", str(path)])
    assert path.read_bytes() == before

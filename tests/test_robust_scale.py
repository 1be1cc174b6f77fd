"""Bad-input battery, ``scale`` side (issue 8): each case is one ``error:`` line naming the file/GPU and
the fix, a non-zero exit code from errors.py, no traceback, no output file left behind, input untouched.
The ingest-side cases (missing, empty, truncated, garbage, CPU-only, AMD) live in test_bad_input.py."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import pytest

from habitat_trace.cli import main
from habitat_trace.errors import OutputError, SpecError, TraceFormatError
from tests.conftest import MLP_FIXTURE


def _doc() -> dict:
    return json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))  # stdlib json writes NaN as a bare token, like Python exporters
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fail(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return int(info.value.code), err


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.rglob("*")}


def _kernel(change: Callable[[dict], None]) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        change(next(e for e in doc["traceEvents"] if e.get("cat") == "kernel"))
    return edit


def _no_props(doc: dict) -> None:
    del doc["deviceProperties"]


def _unknown_props(doc: dict) -> None:
    doc["deviceProperties"][0]["name"] = "NVIDIA Imaginary X9000"


# name -> (edit of the fixture, extra argv, error class, words the message must contain)
TRACE_CASES: dict[str, tuple[Callable[[dict], None] | None, list[str], type, tuple[str, ...]]] = {
    "unknown_target": (None, ["--to", "A10O"], SpecError, ("unknown GPU 'A10O'", "close matches", "A100")),
    "unknown_origin": (_unknown_props, ["--to", "A100"], SpecError, ("NVIDIA Imaginary X9000", "--from")),
    "no_device_properties": (_no_props, ["--to", "A100"], SpecError, ("deviceProperties", "--from")),
    "unknown_from": (None, ["--to", "A100", "--from", "H1OO"], SpecError, ("unknown GPU 'H1OO'", "H100")),
    "negative_dur": (_kernel(lambda k: k.update(dur=-2.0)), ["--to", "A100"], TraceFormatError,
                     ("dur=-2.0", "dur >= 0")),
    "nan_dur": (_kernel(lambda k: k.update(dur=float("nan"))), ["--to", "A100"], TraceFormatError, ("dur=nan",)),
}


@pytest.mark.parametrize("case", TRACE_CASES)
def test_bad_trace_or_gpu(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit, extra, cls, words = TRACE_CASES[case]
    doc = _doc()
    if edit:
        edit(doc)
    src = _write(tmp_path / "in.pt.trace.json", doc)
    before, listing = _digest(src), _files(tmp_path)
    code, err = _fail(["scale", str(src), "-o", str(tmp_path / "out.json"), *extra], capsys)
    assert code == cls.exit_code != 0
    for w in words:
        assert w in err, err
    if cls is not SpecError or "origin" in case or "props" in case:
        assert str(src) in err, err
    assert _digest(src) == before and _files(tmp_path) == listing


def _same_path_variants(src: Path) -> list[Path]:
    link = src.parent / "link.json.gz"
    link.symlink_to(src)
    return [src, link, src.parent / "." / src.name, src.parent / ".." / src.parent.name / src.name]


def test_output_equal_to_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.pt.trace.json.gz"
    src.write_bytes(MLP_FIXTURE.read_bytes())
    before = _digest(src)
    for out in _same_path_variants(src):
        listing = _files(tmp_path)
        code, err = _fail(["scale", str(src), "--to", "A100", "-o", str(out)], capsys)
        assert code == OutputError.exit_code and "is the input trace" in err and "-o" in err
        assert _digest(src) == before and _files(tmp_path) == listing


def test_input_symlink_to_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The input given through a symlink, the output its real path."""
    src = tmp_path / "real.pt.trace.json.gz"
    src.write_bytes(MLP_FIXTURE.read_bytes())
    (tmp_path / "alias.json.gz").symlink_to(src)
    code, err = _fail(["scale", str(tmp_path / "alias.json.gz"), "--to", "A100", "-o", str(src)], capsys)
    assert code == OutputError.exit_code and "is the input trace" in err
    assert src.read_bytes() == MLP_FIXTURE.read_bytes()


def test_output_directory_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nope" / "out.json"
    code, err = _fail(["scale", str(MLP_FIXTURE), "--to", "A100", "-o", str(out)], capsys)
    assert code == OutputError.exit_code and str(out.parent) in err and "does not exist" in err
    assert not out.parent.exists()


def test_several_targets_need_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    code, err = _fail(["scale", str(MLP_FIXTURE), "--to", "A100", "--to", "L4", "-o", str(out)], capsys)
    assert code == OutputError.exit_code and "existing directory" in err and str(out) in err
    assert _files(tmp_path) == set()


SPECS = {
    "syntax": ('[gpus."X"\nsms = 1\n', ("TOML",)),
    "bad_base": ('[gpus."X"]\nbase = "NoSuchGPU"\nsms = 100\n', ("NoSuchGPU",)),
    "bad_value": ('[gpus."X"]\nbase = "A100"\nsms = -4\n', ("sms",)),
}


@pytest.mark.parametrize("case", SPECS)
def test_bad_specs_file(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, words = SPECS[case]
    specs = tmp_path / "extra.toml"
    specs.write_text(text)
    code, err = _fail(["scale", str(MLP_FIXTURE), "--to", "A100", "--specs", str(specs),
                       "-o", str(tmp_path / "out.json")], capsys)
    assert code == SpecError.exit_code and str(specs) in err
    for w in words:
        assert w in err, err
    assert _files(tmp_path) == {"extra.toml"}


def test_missing_specs_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "absent.toml"
    code, err = _fail(["scale", str(MLP_FIXTURE), "--to", "A100", "--specs", str(specs),
                       "-o", str(tmp_path / "out.json")], capsys)
    assert code == SpecError.exit_code and str(specs) in err


def test_kernels_without_launch_parameters_still_scale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc()
    launch = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "warps per SM",
              "est. achieved occupancy %")
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            for key in launch:
                e["args"].pop(key, None)
    src = _write(tmp_path / "in.pt.trace.json", doc)
    out = tmp_path / "out.pt.trace.json"
    main(["scale", str(src), "--to", "H200", "-o", str(out)])  # same chip: the wave law, which needs them
    _, err = capsys.readouterr()
    assert "warning" in err.lower() and "launch" in err.lower(), err
    kernels = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels and {k["args"]["habitat_method"] for k in kernels} == {"fallback"}
    assert all(k["dur"] > 0 for k in kernels)


def test_output_is_written_atomically_only_on_success(tmp_path: Path) -> None:
    out = tmp_path / "ok.pt.trace.json.gz"
    main(["scale", str(MLP_FIXTURE), "--to", "A100", "-o", str(out)])
    assert _files(tmp_path) == {"ok.pt.trace.json.gz"} and os.path.getsize(out) > 0

"""The ``scale`` command: origin resolution, output naming for several --to, one report row per target.

The catalog and engine are replaced by stand-ins (a dict catalog, every duration x 0.5) so this tests
the command's wiring, not the scaling laws.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from habitat_trace.cli import app
from habitat_trace.commands.scale import report
from habitat_trace.pipeline import Options
from habitat_trace.pipeline.document import slug, stem
from habitat_trace.errors import SpecError
from habitat_trace.ingest import load
from tests.conftest import DATA
from tests.emit_helpers import scaled, spec

FIXTURE = DATA / "emit_mlp_h100.pt.trace.json.gz"


class FakeCatalog:
    def __init__(self) -> None:
        self.specs = {s.name: s for s in (spec(), spec("A100 SXM4 80GB", 108), spec("L4", 58))}

    def resolve(self, name: str):
        if name not in self.specs:
            raise SpecError(f"unknown GPU {name!r}; see `habitat-trace gpus`")
        return self.specs[name]

    def for_device(self, device_name: str):
        return self.specs["H100 SXM5 80GB"] if device_name == "NVIDIA H100 80GB HBM3" else None

    def get(self, name: str):
        return self.specs.get(name)
    def for_properties(self, props: dict):  # ROCm's generic names (issue 20); no AMD GPU here
        return None


@pytest.fixture()
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    import habitat_trace.pipeline.options
    import habitat_trace.pipeline.run

    monkeypatch.setattr(habitat_trace.pipeline.options, "load_catalog", lambda extra=None: FakeCatalog())
    monkeypatch.setattr(habitat_trace.pipeline.run, "predict", lambda trace, origin, target: scaled(trace, 0.5, target))


def test_names() -> None:
    assert slug("H100 SXM5 80GB") == "h100-sxm5-80gb"
    assert stem(Path("a/mlp_b32.pt.trace.json.gz")) == "mlp_b32"
    assert stem(Path("x.json")) == "x"


def test_one_target(fakes: None, tmp_path: Path) -> None:
    out = tmp_path / "o.pt.trace.json.gz"
    res = CliRunner().invoke(app, ["scale", str(FIXTURE), "--to", "L4", "-o", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    [row] = __import__("json").loads(res.stdout)["outputs"]
    assert (row["origin"], row["target"], row["output"], row["rank"]) == ("H100 SXM5 80GB", "L4", str(out), None)
    assert load(out).devices[0]["name"] == "L4"


def test_several_targets_need_an_existing_directory(fakes: None, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["scale", str(FIXTURE), "--to", "L4", "--to", "A100 SXM4 80GB", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["emit_mlp_h100.a100-sxm4-80gb.pt.trace.json.gz", "emit_mlp_h100.l4.pt.trace.json.gz"]
    assert res.output.count("emit_mlp_h100.pt.trace.json.gz") == 2  # a report row per target
    from habitat_trace.errors import OutputError

    with pytest.raises(OutputError, match="must be an existing directory"):
        report(FIXTURE, ["L4", "A100 SXM4 80GB"], str(tmp_path / "missing"), Options.of())


def test_unknown_origin_names_from(fakes: None, tmp_path: Path) -> None:
    src = tmp_path / "t.json"
    import gzip

    src.write_bytes(gzip.decompress(FIXTURE.read_bytes()).replace(b"NVIDIA H100 80GB HBM3", b"Mystery GPU"))
    with pytest.raises(SpecError, match="--from"):
        report(src, ["L4"], str(tmp_path / "o.json"), Options.of())
    report(src, ["L4"], str(tmp_path / "o.json"), Options.of(origin="H100 SXM5 80GB"))
    assert (tmp_path / "o.json").exists()


def test_output_equal_to_input_is_refused(fakes: None, tmp_path: Path) -> None:
    src = tmp_path / "t.pt.trace.json.gz"
    src.write_bytes(FIXTURE.read_bytes())
    res = CliRunner().invoke(app, ["scale", str(src), "--to", "L4", "-o", str(src)])
    assert res.exit_code != 0
    assert src.read_bytes() == FIXTURE.read_bytes()
    assert np.array_equal(sorted(p.name for p in tmp_path.iterdir()), ["t.pt.trace.json.gz"])


def test_issue26_item4_output_with_a_trailing_slash_is_a_directory(fakes: None, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """Issue 26, item 4: ``-o newdir/`` (missing directory) with one --to wrote a plain-JSON file named ``newdir``.
    A trailing slash means a directory: it must exist (nothing is created), and then the output goes inside it."""
    from habitat_trace.cli import main

    missing = tmp_path / "newdir"
    with pytest.raises(SystemExit) as exit_:
        main(["scale", str(FIXTURE), "--to", "L4", "-o", f"{missing}/"])
    err = capsys.readouterr().err
    assert exit_.value.code == 5 and "ends in /, so it must be an existing directory" in err, err
    assert list(tmp_path.iterdir()) == []
    missing.mkdir()
    res = CliRunner().invoke(app, ["scale", str(FIXTURE), "--to", "L4", "-o", f"{missing}/"])
    assert res.exit_code == 0, res.output
    assert [p.name for p in missing.iterdir()] == ["emit_mlp_h100.l4.pt.trace.json.gz"]

"""The one pipeline (habitat_trace/pipeline/): one origin rule for the CLI and the API, and the API's scaled
tables built in memory equal to what re-reading the written trace gives."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import habitat_trace
from habitat_trace import pipeline
from habitat_trace.errors import SpecError
from habitat_trace.ingest import load as ingest_load
from habitat_trace.ingest import schema as S
from habitat_trace.pipeline.run import catalog_gpu
from habitat_trace.scale.specs import load_catalog
from tests.conftest import MLP_FIXTURE

TIME_COLUMNS = (S.TS, S.DUR, S.END, S.LAUNCH_TS, S.LAUNCH_DUR)


def _same_table(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for col in a.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        assert np.array_equal(x, y) if col in TIME_COLUMNS else list(x) == list(y), col


def test_api_scaled_tables_equal_the_written_trace_reread(tmp_path: Path) -> None:
    """Trace.scale builds the target tables from the origin's and the timeline (no JSON rendered and parsed
    again); they must be what reading the written file gives, table by table."""
    # with the profiler's overhead kept: removing it collapses some ops to zero length, and re-reading a file
    # re-derives the op links from those ties where the in-memory tables keep the origin's (more precise) links
    scaled = habitat_trace.load(MLP_FIXTURE).scale(to="L4", keep_profiler_overhead=True)
    reread = ingest_load(scaled.write(tmp_path / "l4.pt.trace.json.gz"))
    mine = scaled.tables
    for name in ("gpu", "ops", "calls", "steps", "syncs", "gpu_annotations", "flows", "memory"):
        _same_table(getattr(mine, name), getattr(reread, name))
    assert np.array_equal(mine.event_ts_ns, reread.event_ts_ns)
    assert np.array_equal(mine.event_dur_ns, reread.event_dur_ns)
    assert mine.devices == reread.devices and mine.device_name == reread.device_name == "L4"
    assert mine.meta["habitat_trace"] == reread.meta["habitat_trace"]


@pytest.mark.slow
def test_rescaling_an_output_works_from_the_cli_and_the_api_alike(tmp_path: Path) -> None:
    """Regression (issue 15): `habitat-trace scale out.a100... --to H100` exited 4 ("origin GPU 'A100 SXM4 80GB'
    is not in the catalog") while the API's own origin rule accepted the catalog name an output carries."""
    a100 = tmp_path / "mlp.a100.pt.trace.json.gz"
    run = [sys.executable, "-m", "habitat_trace", "scale"]
    keep = ["--keep-profiler-overhead"]  # exact equality below: see the test above
    first = subprocess.run([*run, str(MLP_FIXTURE), "--to", "A100", "-o", str(a100), *keep], capture_output=True,
                           text=True)
    assert first.returncode == 0, first.stderr
    back_cli = tmp_path / "back_cli.pt.trace.json.gz"
    second = subprocess.run([*run, str(a100), "--to", "H100", "-o", str(back_cli), *keep, "--format", "json"],
                            capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    [row] = json.loads(second.stdout)["outputs"]
    assert (row["origin"], row["target"]) == ("A100 SXM4 80GB", "H100 SXM5 80GB")
    # the API, from the written file and from the in-memory scaled trace, writes the same events
    back_file = habitat_trace.load(a100).scale(to="H100", keep_profiler_overhead=True).write(
        tmp_path / "back_file.pt.trace.json.gz")
    back_mem = habitat_trace.load(MLP_FIXTURE).scale(to="A100", keep_profiler_overhead=True).scale(
        to="H100", keep_profiler_overhead=True).write(tmp_path / "back_mem.json")
    kernels = [habitat_trace.load(p).kernels for p in (back_cli, back_file, back_mem)]
    for k in kernels[1:]:
        assert np.array_equal(k["start_ns"].to_numpy(), kernels[0]["start_ns"].to_numpy())
        assert np.array_equal(k["dur_ns"].to_numpy(), kernels[0]["dur_ns"].to_numpy())
    assert habitat_trace.load(back_mem).gpu == "H100 SXM5 80GB"
    # by default the overhead is removed once: an output says so, and scaling it again removes nothing more
    default = tmp_path / "default.pt.trace.json.gz"
    assert subprocess.run([*run, str(MLP_FIXTURE), "--to", "A100", "-o", str(default)]).returncode == 0
    assert pipeline.overhead_removed(ingest_load(default))
    again = pipeline.host_clock(ingest_load(default))
    assert again.clock.is_identity and again.removed_before


def test_one_origin_rule() -> None:
    catalog = load_catalog()
    tables = ingest_load(MLP_FIXTURE)
    plain, named = pipeline.Options(catalog), pipeline.Options(catalog, origin="A100")
    assert pipeline.resolve_origin(tables, plain).name == "H100 SXM5 80GB"  # torch's device name
    assert pipeline.resolve_origin(tables, named).name == "A100 SXM4 80GB"  # --from wins
    assert catalog_gpu(catalog, "L4").name == "L4"  # the catalog name our outputs carry
    assert catalog_gpu(catalog, None) is None
    nameless = type("T", (), {"device_name": None, "device_properties": {}, "path": Path("x.json")})()
    with pytest.raises(SpecError, match="names no GPU"):
        pipeline.resolve_origin(nameless, plain)  # type: ignore[arg-type]
    unknown = type("T", (), {"device_name": "NVIDIA Imaginary 9000", "device_properties": {"name": "x"},
                             "path": Path("x.json")})()
    with pytest.raises(SpecError, match="not in the catalog; name it with --from"):
        pipeline.resolve_origin(unknown, plain)  # type: ignore[arg-type]


def test_scaled_carries_the_engine_facts_once() -> None:
    """explain reads the facts of the very prediction replay used (they were computed three times per target)."""
    catalog = load_catalog()
    tables = ingest_load(MLP_FIXTURE)
    [scaled] = pipeline.Run([tables], pipeline.Options(catalog)).replay(catalog.resolve("L4")).ranks
    facts = scaled.prediction.facts
    assert facts is not None and len(facts.gamma) == len(tables.gpu)
    kept = pipeline.Options(catalog, host=pipeline.Host(keep_profiler_overhead=True))
    [identity] = pipeline.Run([tables], kept).baseline().ranks
    assert identity.prediction.facts is None
    assert np.array_equal(identity.timeline.gpu_start_ns, tables.gpu[S.TS].to_numpy())


@pytest.mark.parametrize("arg, value, says", [("registers per thread", -1, "registers per thread -1 out of range"),
                                               ("shared memory", -4096, "shared memory -4096 out of range"),
                                               ("registers per thread", 300, "registers per thread 300 out of range")])
@pytest.mark.slow
def test_out_of_range_launch_parameters_fall_back_with_a_reason(tmp_path: Path, arg: str, value: int,
                                                                says: str) -> None:
    """Regression (issue 15): a kernel with "registers per thread": -1 or negative shared memory crashed in
    occupancy.py with exit 70 ("internal error"): ingest never range-checked launch parameters."""
    import gzip
    import json

    doc = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    kernel["args"][arg] = value
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "out.json"
    # H200: the same chip as the H100 origin, so the wave law, which needs launch parameters, applies
    done = subprocess.run([sys.executable, "-m", "habitat_trace", "scale", str(src), "--to", "H200", "-o", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "have no valid launch parameters" in done.stderr
    k = habitat_trace.load(out).kernels
    row = k[k["name"] == kernel["name"]].iloc[0]
    assert row["registers_per_thread"] == 0 and row["grid_x"] == 0  # dropped at ingest: nothing half-valid
    scaled = habitat_trace.load(src).scale(to="H200").kernels
    first = scaled.iloc[int(np.flatnonzero(scaled["name"] == kernel["name"])[0])]
    assert first["method"] == "fallback" and first["reason"].startswith(says)
    # across chips the sustained-rate law needs no launch parameters; the reason still says what was dropped
    across = habitat_trace.load(src).scale(to="A100").kernels
    first = across.iloc[int(np.flatnonzero(across["name"] == kernel["name"])[0])]
    assert first["method"] == "sustained" and first["reason"].startswith(says)

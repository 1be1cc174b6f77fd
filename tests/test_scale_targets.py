"""Done-when of the timeline issue with the real engine: every shared trace scaled to H200, A100, L4, T4
and B200 keeps its kernel count, durations > 0, no kernel before its launch, no new same-stream overlap;
written outputs name the target in deviceProperties, re-ingest, pass the Perfetto rules, input untouched."""
from __future__ import annotations

import hashlib

import pytest

from habitat_trace.cli import main
from tests.conftest import new_violations
from habitat_trace.timeline.replay import replay
from habitat_trace.ingest import load
from habitat_trace.scale.engine import predict
from habitat_trace.scale.specs import load_catalog
from tests.conftest import TRACES, needs_shared
from tests.test_replay import _invariants

TARGETS = ("H200", "A100", "L4", "T4", "B200")
CATALOG = load_catalog()


def _shared_traces() -> list[str]:
    return sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.pt.trace.json.gz")) if TRACES.is_dir() else []


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("name", _shared_traces())
def test_every_shared_trace_to_every_target(name: str) -> None:
    trace = load(TRACES / name)
    origin = CATALOG.for_device(trace.device_name)
    for target in TARGETS:
        pred = predict(trace, origin, CATALOG.resolve(target))
        assert len(pred.dur_ns) == len(trace.gpu) and (pred.dur_ns > 0).all()
        _invariants(trace, replay(trace, pred))


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("name", ["h100-sxm/mlp_b32_fp32.pt.trace.json.gz", "h200-sxm/gnmt_b64_fp32.pt.trace.json.gz",
                                  "h100-sxm/no_record_shapes/resnet50_b64_amp.pt.trace.json.gz"])
def test_written_outputs(name: str, tmp_path) -> None:
    src = TRACES / name
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    try:
        main(["scale", str(src), *[a for t in TARGETS for a in ("--to", t)], "-o", str(tmp_path)])
    except SystemExit as e:
        assert not e.code
    outs = sorted(tmp_path.glob("*.pt.trace.json.gz"))
    assert len(outs) == len(TARGETS)
    original = load(src)
    for out in outs:
        scaled = load(out)
        assert len(scaled.gpu) == len(original.gpu)
        assert (scaled.gpu["dur_ns"] > 0).all()
        target = CATALOG.resolve(scaled.meta["habitat_trace"]["target"])
        assert scaled.devices[0]["name"] == target.name
        errors, _ = new_violations(original.events, scaled.events)
        assert not errors
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before

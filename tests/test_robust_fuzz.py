"""Fuzzing the whole ``scale`` pipeline (issue 8): a real small trace, mutated the ways exporters and
hand edits break traces, gives only a clean error (one ``error:`` line, an exit code from errors.py) or
a valid output (re-ingests, same kernel count, durations > 0, no Perfetto rule broken that the input
kept). Deterministic under the CI profile (tests/conftest.py); each example is one in-process run."""
from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path
from typing import Any

import tempfile

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from habitat_trace.cli import main
from tests.conftest import new_violations
from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from tests.conftest import MLP_FIXTURE

pytestmark = pytest.mark.slow  # ~40 s: CI runs it (--all)
EXIT_CODES = {1, 2, 3, 4, 5}  # habitat_trace/errors.py
BASE = json.loads(gzip.decompress(MLP_FIXTURE.read_bytes()))
N = len(BASE["traceEvents"])
KEYS = ("ts", "dur", "ph", "name", "cat", "pid", "tid", "id", "args")
ARG_KEYS = ("correlation", "External id", "grid", "block", "registers per thread", "shared memory",
            "device", "stream", "Input Dims")
WEIRD = st.sampled_from([None, "12", "", "ünï©ødé 名前 \u202e", [], [1, "x"], {}, {"a": 1}, True, -1, 0,
                         -1e300, 1e300, 2**70, -(2**63), float("nan"), float("inf"), 3.5])


def _drop(doc: dict, i: int, key: str) -> None:
    e = doc["traceEvents"][i]
    if isinstance(e, dict):
        e.pop(key, None)


def _set(doc: dict, i: int, key: str, value: Any) -> None:
    e = doc["traceEvents"][i]
    if isinstance(e, dict):
        e[key] = value


def _set_arg(doc: dict, i: int, key: str, value: Any) -> None:
    e = doc["traceEvents"][i]
    if isinstance(e, dict) and isinstance(e.get("args"), dict):
        e["args"][key] = value


def _dup_correlation(doc: dict, i: int, j: int) -> None:
    a, b = doc["traceEvents"][i], doc["traceEvents"][j]
    if isinstance(a, dict) and isinstance(b, dict) and isinstance(a.get("args"), dict) \
            and isinstance(b.get("args"), dict) and "correlation" in a["args"]:
        b["args"]["correlation"] = a["args"]["correlation"]


# half the picks hit GPU events and launch calls (a tenth of the trace), where linking and scaling happen
GPU_IDX = [i for i, e in enumerate(BASE["traceEvents"])
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "ac2g")]
idx = st.one_of(st.integers(0, N - 1), st.sampled_from(GPU_IDX))
MUTATION = st.one_of(
    st.tuples(st.just("drop"), idx, st.sampled_from(KEYS)),
    st.tuples(st.just("set"), idx, st.sampled_from(KEYS), WEIRD),
    st.tuples(st.just("arg"), idx, st.sampled_from(ARG_KEYS), WEIRD),
    st.tuples(st.just("dup_corr"), idx, idx),
    st.tuples(st.just("not_dict"), idx, st.sampled_from([None, 1, "event", [1, 2]])),
    st.tuples(st.just("shuffle"), st.randoms(use_true_random=False)),
    st.tuples(st.just("no_props")),
    st.tuples(st.just("props"), WEIRD),
)


def mutate(doc: dict, m: tuple) -> None:
    kind, *a = m
    ev = doc["traceEvents"]
    if kind == "drop":
        _drop(doc, *a)
    elif kind == "set":
        _set(doc, *a)
    elif kind == "arg":
        _set_arg(doc, *a)
    elif kind == "dup_corr":
        _dup_correlation(doc, *a)
    elif kind == "not_dict":
        ev[a[0]] = a[1]
    elif kind == "shuffle":
        a[0].shuffle(ev)
    elif kind == "no_props":
        doc.pop("deviceProperties", None)
    elif kind == "props":
        doc["deviceProperties"] = a[0]


def _dumps(doc: dict) -> str:
    # stdlib json writes NaN/Infinity tokens like Python exporters do; huge ints stay exact
    return json.dumps(doc)


def _kernel_count(path: Path) -> int:
    return int((load(path).gpu[S.CAT] == S.CAT_KERNEL).sum())


def _assert_valid(src: Path, out: Path, doc: dict) -> None:
    written = json.loads(out.read_text())
    t = load(out)
    assert int((t.gpu[S.CAT] == S.CAT_KERNEL).sum()) == _kernel_count(src)
    assert (t.gpu[S.DUR] > 0).all()
    errors, _ = new_violations(doc["traceEvents"], written["traceEvents"])
    assert errors == [], [str(v) for v in errors[:5]]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None,
          max_examples=min(settings().max_examples, 60),
          phases=(Phase.explicit, Phase.reuse, Phase.generate))  # shrinking a full run can take minutes
@given(mutations=st.lists(MUTATION, min_size=1, max_size=6), use_from=st.booleans())
# issue 33, item 5: a cpu_op's dur "12" was read as 12 µs, and the output broke nesting
@example(mutations=[("set", 4, "dur", "12")], use_from=False)
# an ac2g flow "f" without its "cat" (not in the flow table) stayed at its old time and left the kernel it was bound
# to:
# "flow f ... is inside no slice on its track" (a random-profile run, 2026-11-27; tables.FLOW_OTHER)
@example(mutations=[("drop", 1179, "cat")], use_from=False)
def test_mutated_trace_scales_or_fails_cleanly(mutations: list[tuple], use_from: bool, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(BASE)
    for m in mutations:
        mutate(doc, m)
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    src, out = case / "in.pt.trace.json", case / "out.pt.trace.json"
    text = _dumps(doc)
    src.write_text(text)
    argv = ["scale", str(src), "--to", "A100", "-o", str(out)] + (["--from", "H100"] if use_from else [])
    capsys.readouterr()
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    _, err = capsys.readouterr()
    assert src.read_text() == text  # input untouched
    if code == 0:
        _assert_valid(src, out, doc)
    else:
        assert code in EXIT_CODES, err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not out.exists() and {p.name for p in case.iterdir()} == {"in.pt.trace.json"}


def test_unmutated_base_is_valid(tmp_path: Path) -> None:
    """The fuzz's reference point: the fixture itself scales and passes the checks."""
    src, out = tmp_path / "in.pt.trace.json", tmp_path / "out.pt.trace.json"
    src.write_text(_dumps(BASE))
    main(["scale", str(src), "--to", "A100", "-o", str(out)])
    _assert_valid(src, out, BASE)
    assert not math.isnan(json.loads(out.read_text())["traceEvents"][-1].get("ts", 0.0))



def test_a_flow_bound_to_a_kernel_without_cat_stays_inside_it(tmp_path: Path) -> None:
    """Regression (this fuzz in CI, 2026-11-27; tests/data/fuzz_kernel_without_cat.pt.trace.json.gz is its falsifying
    input: the MLP fixture with a kernel's "cat" and another event's "dur" dropped, shuffled). A kernel without "cat"
    is not a GPU row, so its times take the CPU map; the ac2g flow bound to it moved with the GPU event before it
    instead and left the slice ("flow f ... is inside no slice on its track"). A flow outside every GPU row now takes
    the CPU map too."""
    src = tmp_path / "in.pt.trace.json"
    src.write_bytes(gzip.decompress((Path(__file__).parent / "data/fuzz_kernel_without_cat.pt.trace.json.gz")
                                    .read_bytes()))
    out = tmp_path / "out.pt.trace.json"
    main(["scale", str(src), "--to", "A100", "-o", str(out)])
    _assert_valid(src, out, json.loads(src.read_text()))

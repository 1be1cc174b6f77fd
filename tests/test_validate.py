"""validate: a prediction compared with a measured trace (steps, ops by name+occurrence, kernels by order)."""
from __future__ import annotations

import json

from habitat_trace.cli import main
from habitat_trace.ingest import load
from habitat_trace.analysis.validate import _pair
from habitat_trace.analysis.validate import validate as validate_tables
from habitat_trace.pipeline import Options, Run
from tests.conftest import DATA, TRACES, needs_shared

FIXTURE = DATA / "mlp_b32_fp32.pt.trace.json.gz"


def validation(predicted, measured):
    """analysis.validate of two loaded traces, the measured one replayed on its own as a run of one rank."""
    options = Options.of()
    return validate_tables(predicted, measured, options.catalog, lambda: Run([measured], options).baseline().ranks[0])


def validate(predicted, measured) -> dict:
    """The report as a dict of rows: "step" by figure (the iteration too), "ops"/"kernels" matched, the worst."""
    v = validation(predicted, measured)
    return _keyed({"steps": v.steps.to_dict("records"), "matched": v.matched.to_dict("records"),
                   "worst_kernels": v.worst_kernels.to_dict("records")})


def _keyed(report: dict) -> dict:
    steps = {r["figure"]: r for r in report["steps"]}
    matched = {r["what"]: r for r in report["matched"]}
    return {"step": steps, "iteration": steps["iteration"], "steps_compared": report["steps"][0]["steps_compared"],
            "ops": matched["ops"], "kernels": matched["kernels"], "worst_kernels": report["worst_kernels"]}


def test_a_trace_against_itself_has_no_error() -> None:
    t = load(FIXTURE)
    r = validate(t, t)
    assert r["steps_compared"] == len(t.steps)
    assert all(v["error_pct"] == 0 for v in r["step"].values())
    assert r["kernels"]["matched"] == int((t.gpu.step >= 0).sum())
    assert r["ops"]["total_error_pct"] == 0 and r["kernels"]["median_abs_error_pct"] == 0


def test_kernels_pair_by_name_then_position() -> None:
    pred = [("a", 1, "wave"), ("gemm_x", 2, "roofline-op"), ("b", 3, "wave")]
    meas = [("a", 10), ("gemm_y", 20), ("b", 30)]
    pairs = _pair(pred, meas)
    assert [(p[0], m[0]) for p, m in pairs] == [("a", "a"), ("b", "b"), ("gemm_x", "gemm_y")]


def _cli(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_cli_json_after_scale(tmp_path, capsys) -> None:
    out = tmp_path / "same.pt.trace.json.gz"
    assert _cli(["scale", str(FIXTURE), "--to", "H100", "-o", str(out)]) == 0
    capsys.readouterr()
    assert _cli(["validate", str(out), str(FIXTURE), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"steps", "matched", "worst_ops", "worst_kernels", "warnings"}
    assert _keyed(report)["step"]["gpu_busy"]["error_pct"] == 0


@needs_shared
def test_shared_sm64_pair(tmp_path, capsys) -> None:
    specs = tmp_path / "sm64.toml"
    specs.write_text('[gpus."H100-SM64"]\nbase = "H100"\nsms = 64\n')
    out = tmp_path / "pred.json.gz"
    assert _cli(["scale", str(TRACES / "h100-sxm/vgg16_b32_fp32.pt.trace.json.gz"), "--to", "H100-SM64",
                 "--specs", str(specs), "-o", str(out)]) == 0
    capsys.readouterr()
    assert _cli(["validate", str(out), str(TRACES / "h100-sxm-sm64/vgg16_b32_fp32_sm64.pt.trace.json.gz"),
                 "--format", "json", "--top", "3"]) == 0
    r = _keyed(json.loads(capsys.readouterr().out))
    assert abs(r["step"]["gpu_busy"]["error_pct"]) < 10
    assert r["kernels"]["matched"] > 500 and len(r["worst_kernels"]) == 3
    assert all(k["method"] in ("wave", "roofline-op", "copy", "fallback") for k in r["worst_kernels"])


def _scaled(tmp_path, *extra: str) -> "object":
    out = tmp_path / "same.pt.trace.json.gz"
    assert _cli(["scale", str(FIXTURE), "--to", "H100", "-o", str(out), *extra]) == 0
    return load(out)


def test_a_de_profiled_prediction_is_compared_with_the_de_profiled_measurement(tmp_path) -> None:
    """issue 16: scale writes the timeline without the profiler's overhead, so validate removes it from the
    measured trace too (same GPU here: every figure agrees) instead of reporting the overhead as an error."""
    r = validate(_scaled(tmp_path), load(FIXTURE))
    assert r["iteration"]["measured_source"] == "estimated"
    assert abs(r["iteration"]["error_pct"]) < 0.1 and abs(r["step"]["cpu_step"]["error_pct"]) < 0.1
    raw = step_figures_ms(load(FIXTURE))
    assert r["step"]["cpu_step"]["measured_ms"] < raw  # the profiled CPU step is longer


def step_figures_ms(trace) -> float:
    from habitat_trace.timeline.steps import step_figures
    return float(step_figures(trace.steps, trace.gpu).table["cpu_ns"].mean()) / 1e6


def test_a_kept_overhead_prediction_is_compared_with_the_profiled_measurement(tmp_path) -> None:
    r = validate(_scaled(tmp_path, "--keep-profiler-overhead"), load(FIXTURE))
    assert r["iteration"]["measured_source"] == "profiled"
    assert all(v["error_pct"] == 0 for v in r["step"].values())
    assert r["step"]["cpu_step"]["measured_ms"] == step_figures_ms(load(FIXTURE))


def test_the_measured_real_loop_wins_when_the_trace_carries_it(tmp_path) -> None:
    import gzip
    from habitat_trace.ingest import schema as S

    doc = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    doc[S.UNPROFILED_STEP_KEY] = [2_500_000, 2_600_000, 2_700_000]
    measured = tmp_path / "measured.pt.trace.json"
    measured.write_text(json.dumps(doc))
    r = validate(_scaled(tmp_path), load(measured))
    assert r["iteration"]["measured_source"] == "measured"
    assert r["iteration"]["measured_ms"] == max(2.6, r["step"]["gpu_busy"]["measured_ms"])


DIST = DATA / "dist_mlp_h100x2"


def test_issue31_a_scale_out_is_validated_against_one_rank_of_the_real_run(tmp_path, capsys) -> None:
    """Issue 31, item 5: `validate PREDICTED RANK0-OF-REAL-DDP-RUN` refused ("run different programs: 564 of 1174
    top-level ops pair up"): DDP wraps the forward in DistributedDataParallel.forward. Now the wrapper is looked
    through, the model's ops pair as on one GPU, and what DDP adds is listed on both sides."""
    out = tmp_path / "ddp2.pt.trace.json.gz"
    assert _cli(["scale", str(DIST / "single.pt.trace.json.gz"), "--to", "H100", "--world-size", "2", "--strategy",
                 "ddp", "-o", str(out)]) == 0
    v = validation(load(out), load(DIST / "ddp-rank0.pt.trace.json.gz"))
    ops = v.matched.set_index("what").loc["ops"]
    assert ops["matched"] >= 100 and abs(ops["total_error_pct"]) < 25  # the model's own ops, paired
    added = {(r.side, r.name) for r in v.added.itertuples()}
    assert ("measured", "c10d::allreduce_") in added and ("predicted", "(synthesized)") in added
    assert not any(name.startswith("DistributedDataParallel") for _, name in added)
    capsys.readouterr()
    assert _cli(["validate", str(out), str(DIST / "ddp-rank0.pt.trace.json.gz"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in doc["added"]} >= {"c10d::allreduce_", "(synthesized)"}


def test_issue31_a_one_gpu_trace_against_itself_lists_nothing_added() -> None:
    t = load(DIST / "single.pt.trace.json.gz")
    v = validation(t, t)
    assert len(v.added) == 0

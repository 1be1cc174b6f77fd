"""Regenerate the README's (and docs/accuracy.md's) example outputs, so they cannot go stale.

    python benchmarks/readme_figures.py            # rewrite every generated section (and docs/compare.png)
    python benchmarks/readme_figures.py --check    # exit 1 and name the stale sections; write nothing

A generated section sits between ``<!-- generated: NAME ... -->`` and ``<!-- end -->`` in a Markdown file; its
body is exactly ``SECTIONS[NAME].render()``. Sections that need ``../shared`` (the compare table on the shared
GPT-2 trace, and the figure drawn from the same run) are left as they are when it is absent. tests/test_readme.py
fails when a section differs from what this script would write.

To add a row to the README's accuracy table, add one ``AccuracyRow`` to ``ACCURACY_ROWS``.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SHARED = Path(os.environ.get("HABITAT_SHARED", ROOT.parent / "shared"))
DOCS = (ROOT / "README.md", ROOT / "docs" / "accuracy.md")  # files that hold generated sections
FIGURE = ROOT / "docs" / "compare.png"

MARKER = re.compile(r"(<!-- generated: (?P<name>[\w-]+)[^>]*-->\n)(?P<body>.*?)(<!-- end -->)", re.S)

# The compare example: the shared H100 GPT-2 trace (bf16 AMP, batch 8 x 1024 tokens, 2 profiled steps)
COMPARE_TRACE = "../shared/data/traces/h100-sxm/gpt2_b8_s1024_amp.pt.trace.json.gz"
COMPARE_TO = "H100,H200,A100,L4,T4,B200"
PNG_KEY = "habitat-trace-table-sha256"  # tEXt chunk of docs/compare.png: the table text it was drawn with


def _shared_path(arg: str) -> str:
    return str(SHARED / arg.removeprefix("../shared/")) if arg.startswith("../shared/") else arg


def run_cli(args: list[str], cwd: Path | None = None) -> str:
    """``habitat-trace ARGS`` in a fresh interpreter importing this checkout; stdout, trailing blanks removed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "habitat_trace", *map(_shared_path, args)], cwd=cwd, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"habitat-trace {' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
    return "\n".join(line.rstrip() for line in out.stdout.strip("\n").splitlines()) + "\n"


def compare_args(plot: str = "compare.png") -> list[str]:
    return ["compare", COMPARE_TRACE, "--to", COMPARE_TO, "--plot", plot]


def compare_section(plot_to: Path | None = None) -> str:
    """The command (as the README shows it, writing compare.png in the working directory) and its output."""
    with tempfile.TemporaryDirectory() as tmp:
        table = run_cli(compare_args(), cwd=Path(tmp))
        if plot_to is not None:
            _write_figure(Path(tmp) / "compare.png", plot_to, table)
    return f"```bash\nhabitat-trace {' '.join(compare_args())}\n```\n\n```text\n{table}```\n"


# --- docs/compare.png carries the hash of the table it was drawn with -------------------------------------------

def table_hash(section: str) -> str:
    return hashlib.sha256(section.encode()).hexdigest()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    # PNG chunk layout: length, type, data, CRC-32 over type + data (PNG spec, ISO/IEC 15948 §5.3)
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _write_figure(png: Path, dest: Path, table: str) -> None:
    if figure_hash(dest) == table_hash(table):
        return  # drawn from this very table already: keep the file (no churn in git)
    data = png.read_bytes()
    end = data.rindex(b"IEND") - 4  # the IEND chunk starts with its 4-byte length
    text = _png_chunk(b"tEXt", PNG_KEY.encode() + b"\0" + table_hash(table).encode())
    dest.write_bytes(data[:end] + text + data[end:])


def figure_hash(png: Path) -> str | None:
    """The table hash stored in a PNG written by this script; None when it has none."""
    data = png.read_bytes() if png.exists() else b""
    key = PNG_KEY.encode() + b"\0"
    at = data.find(key)
    return data[at + len(key):at + len(key) + 64].decode() if at >= 0 else None


def compare_table_text(section: str) -> str:
    """The ```text body of a compare section (what the figure's hash covers)."""
    return section.split("```text\n", 1)[1].rsplit("```", 1)[0]


# --- accuracy tables from benchmarks/results/*.csv ------------------------------------------------------------

def accuracy_rows(name: str = "accuracy.csv") -> list[dict]:
    """benchmarks/results/accuracy.csv (written by benchmarks/accuracy.py), numbers as floats; ``name``
    accuracy_heldout.csv: the held-out re-measurement (accuracy.py --heldout --name accuracy_heldout)."""
    out = []
    for row in csv.DictReader((RESULTS / name).open()):
        rec: dict = {}
        for k, v in row.items():
            if v == "":
                continue  # a kernel class absent from this pair
            try:
                rec[k] = float(v)
            except ValueError:
                rec[k] = v
        out.append(rec)
    return out


def _range_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import range_eval  # benchmarks/range_eval.py: the origin row's range and the user's step (issue 35)

    return range_eval


def range_tables() -> tuple[str, str]:
    """docs/accuracy.md's held-out origin-row and anchored-target tables, from range_eval.py's rows."""
    r = _range_module()
    folder = RESULTS / "launch_bound"
    return (r.coverage_table(r.read_rows(folder / "range_rows.csv")),
            r.anchor_table(r.read_rows(folder / "anchor_rows.csv")))


def _accuracy_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import accuracy  # benchmarks/accuracy.py: the tables of accuracy.md

    return accuracy


def _mean_abs(values: list[float]) -> float:
    return sum(abs(v) for v in values) / len(values)


@dataclass(frozen=True)
class AccuracyRow:
    """One row of the README's accuracy table: a measured prediction task and where its details are."""
    task: str
    gpus: str
    cells: Callable[[], tuple[str, str, str, str]]  # pairs or kernels, mean error, worst/p90, baseline (named)
    details: str  # a Markdown link
    short: str = ""  # its name on the one line of rows not re-run (accuracy_summary), if not ``task``


def heldout_rows(dataset: str) -> list[dict]:
    """Rows of the held-out re-measurement: "heldout" (traces as recorded with habitat_trace.schedule) or
    "heldout-plain" (the hook's measured step stripped)."""
    return [r for r in accuracy_rows("accuracy_heldout.csv") if r["dataset"] == dataset]


def heldout_section() -> str:
    """docs/accuracy.md's held-out table: the repeatability line accuracy.py wrote, then the iteration table."""
    first = (RESULTS / "accuracy_heldout.md").read_text().splitlines()[0]
    rows = heldout_rows("heldout") + heldout_rows("heldout-plain")
    return first + "\n\n" + _accuracy_module().iteration_summary(rows)


def _step_cells(category: str | None, source: Callable[[], list[dict]] = accuracy_rows
                ) -> Callable[[], tuple[str, str, str, str]]:
    def cells() -> tuple[str, str, str, str]:
        rows = [r for r in source() if category in (None, r["category"])]
        busy = [r["busy_error_pct"] for r in rows]
        workloads = len({(r["dataset"], r["workload"]) for r in rows})
        return (f"{len(rows)} pairs, {workloads} workloads", f"{_mean_abs(busy):.1f}%", f"{max(map(abs, busy)):.1f}%",
                f"{_mean_abs([r['identity_error_pct'] for r in rows]):.1f}% (no change)")
    return cells


def _iteration_cells(key: str, same_host: bool, launch_bound: bool = False,
                     source: Callable[[], list[dict]] = accuracy_rows) -> Callable[[], tuple[str, str, str, str]]:
    """Iteration time (or speed-up) against the real, un-profiled loop (issue 16): ``same_host`` keeps the
    SM-scaled pairs (one machine); otherwise every pair, with the target host's speed given (host_matched_*)."""
    def cells() -> tuple[str, str, str, str]:
        rows = [r for r in source() if (r["category"] == "SM-scaled") == same_host or not same_host]
        if launch_bound:
            rows = [r for r in rows if str(r["launch_bound"]) == "True"]
        err = [r[key] for r in rows]
        base = _mean_abs([r["profiled_iteration_error_pct"] for r in rows])
        return (f"{len(rows)} pairs", f"{_mean_abs(err):.1f}%", f"{max(map(abs, err)):.1f}%",
                f"{base:.1f}% (profiled step)" if "speedup" not in key else "-")
    return cells


def _origin_cells(name: str, launch_bound: bool = True, plain: bool = True) -> Callable[[], tuple[str, str, str, str]]:
    """compare's first row against the real loop (``name`` under results/: overhead_eval.py's origin_rows.csv or
    range_eval.py's launch_bound/range_rows.csv): launch-bound rows (``launch_bound``), traces without the hook's
    measured step (``plain``); the share whose measured loop lies inside the stated range and the range's median
    width (high / low); baseline: the profiled step."""
    def cells() -> tuple[str, str, str, str]:
        rows = [r for r in csv.DictReader((RESULTS / name).open())
                if (r["launch_bound"] == "True") == launch_bound and ("+hook" not in r["option"]) == plain]
        err = [float(r["error_pct"]) for r in rows]
        judged = _accuracy_module().judged_error
        base = [judged(float(r["profiled_ms"]), float(r["measured_median_ms"]), float(r["measured_steady_ms"]))
                for r in rows]
        inside = sum(r["inside"] == "True" for r in rows) / len(rows)
        width = statistics.median(float(r["high_ms"]) / float(r["low_ms"]) for r in rows)
        return (f"{len(rows)} traces, {100 * inside:.0f}% inside its range ({width:.2f}x wide)",
                f"{_mean_abs(err):.1f}%", f"{max(map(abs, err)):.1f}%", f"{_mean_abs(base):.1f}% (profiled step)")
    return cells


# A row whose recorded set is not in the repository (the H200 recordings of timm's and NeuSight's workloads:
# benchmarks/collect/collect_timm.py, collect_neusight.py) says so instead of showing an older model's figure.
NOT_RERUN = ("-", "-", "-", "not re-run after issue 32: its H200 recordings are not kept here")


def _anchor_cells() -> tuple[str, str, str, str]:
    """range_eval.py's same-host launch-bound targets with the origin's measured step given (--measured-step), left
    out those whose target ran another program; baseline: the same rows without it."""
    rows = [r for r in csv.DictReader((RESULTS / "launch_bound" / "anchor_rows.csv").open())
            if r["launch_bound"] == "True" and r["other_program"] == "False" and not r["target"].startswith("H100 SXM")]
    given = [float(r["error_pct"]) for r in rows if r["given_ms"]]
    none = [float(r["error_pct"]) for r in rows if not r["given_ms"]]
    return (f"{len(given)} pairs", f"{_mean_abs(given):.1f}%", f"{max(map(abs, given)):.1f}%",
            f"{_mean_abs(none):.1f}% (no step given)")


def _neusight_cells(path: str, gpus: tuple[str, ...] | None, origin: str | None = None
                    ) -> Callable[[], tuple[str, str, str, str]]:
    """Drift-free step GPU time across architectures (benchmarks/neusight_e2e.py, neusight_amd.py) beside
    NeuSight's published error on the same cells where it exists; ``origin``: the rows of one origin GPU's traces."""
    def cells() -> tuple[str, str, str, str]:
        rows = list(csv.DictReader((RESULTS / path).open()))
        if gpus is not None:
            rows = [r for r in rows if r["gpu"] in gpus]
        if origin is not None:
            rows = [r for r in rows if r.get("origin") == origin]
        if not rows:
            return NOT_RERUN
        err = [float(r["error_pct"]) for r in rows]
        theirs = [float(r["neusight_error_pct"]) for r in rows if r.get("neusight_error_pct")]
        base = f"{_mean_abs(theirs):.1f}% (NeuSight)" if theirs else "5.7-33% (NeuSight, its AMD GPUs)"
        return f"{len(rows)} cells", f"{_mean_abs(err):.1f}%", f"{max(map(abs, err)):.1f}%", base
    return cells


def _gemm_to_h100_cells() -> tuple[str, str, str, str]:
    """The cross-chip law on NeuSight's FP32 GEMMs from their five GPUs to our H100 (benchmarks/crossarch/
    gemm_kernels.py), kernels of >= 0.1 ms there (below, the H100 timing is the host's launch path)."""
    rows = {(r["set"], r["subset"]): r for r in csv.DictReader((RESULTS / "crossarch_gemm_kernels.csv").open())}
    big, every = rows[("to H100", ">= 0.1 ms")], rows[("to H100", "all")]
    kbig, kevery = rows[("to H100 kernel time", ">= 0.1 ms")], rows[("to H100 kernel time", "all")]
    return (f"{int(big['kernels']):,} kernels >= 0.1 ms", f"{100 * float(big['median_abs']):.1f}% (median; every row "
            f"of {int(every['kernels']):,}: {100 * float(every['median_abs']):.1f}%; on the H100's kernel times "
            f"{100 * float(kbig['median_abs']):.1f}%, every row {100 * float(kevery['median_abs']):.1f}%)",
            f"{100 * float(big['p90_abs']):.1f}% (p90)",
            f"{100 * float(big['before_median_abs']):.1f}% (soft split, before issue 32)")


def _logo_cells() -> tuple[str, str, str, str]:
    rows = {(r["target"], r["method"]): r for r in csv.DictReader((RESULTS / "learned_logo.csv").open())}
    mlp, wave = rows[("all", "mlp")], rows[("all", "wave")]
    return (f"{int(mlp['n']):,} predictions", f"{100 * float(mlp['median']):.1f}% (median)",
            f"{100 * float(mlp['p90']):.1f}% (p90)", f"{100 * float(wave['median']):.1f}% (wave law)")


def _timm_rows(origin: str, same_program: bool = True) -> list[dict]:
    """benchmarks/results/timm_published.csv (benchmarks/crossarch/timm_published.py): one row per (origin set, model,
    GPU); ``same_program`` drops the rows of the torch 2.9.1 tables measured on re-parameterized models."""
    rows = [r for r in csv.DictReader((RESULTS / "timm_published.csv").open()) if r["origin"] == origin]
    return [r for r in rows if not (same_program and r["other_program"] == "True")]


def _timm_cells(origin: str) -> Callable[[], tuple[str, str, str, str]]:
    """compare's iteration time against timm's published step, per GPU, beside the wave law it replaced."""
    def cells() -> tuple[str, str, str, str]:
        rows = _timm_rows(origin)
        if not rows:
            return NOT_RERUN
        short = {g: g.replace("RTX PRO 6000 Blackwell ", "").replace("RTX ", "") for g in {r["gpu"] for r in rows}}
        per = {short[g]: _mean_abs([100 * float(r["error"]) for r in rows if r["gpu"] == g]) for g in sorted(short)}
        err = [100 * float(r["error"]) for r in rows]
        old = [100 * float(r["wave_law_error"]) for r in rows]
        each = ", ".join(f"{g} {v:.1f}" for g, v in per.items()) if len(per) > 1 else ""
        return (f"{len(rows)} (model, GPU)", f"{_mean_abs(err):.1f}%" + (f" ({each})" if each else ""),
                f"{max(map(abs, err)):.1f}%", f"{_mean_abs(old):.1f}% (wave law)")
    return cells


def _invariance_cells() -> tuple[str, str, str, str]:
    a = {(r["model"], r["gpu"]): float(r["predicted_ms"]) for r in _timm_rows("H100", False)}
    d = [100 * abs(float(r["predicted_ms"]) / a[(r["model"], r["gpu"])] - 1) for r in _timm_rows("H200", False)
         if (r["model"], r["gpu"]) in a]
    if not d:
        return NOT_RERUN
    within = sum(v <= 5 for v in d) / len(d)
    return f"{len(d)} (model, GPU)", f"{_mean_abs(d):.1f}%", f"{max(d):.1f}%", f"{100 * within:.0f}% within 5%"


def _train_cells() -> tuple[str, str, str, str]:
    """compare's iteration time against NVIDIA DeepLearningExamples' published AMP training steps (batch / img/s;
    benchmarks/results/train_published.csv from benchmarks/crossarch/train_published.py), beside the wave law."""
    rows = list(csv.DictReader((RESULTS / "train_published.csv").open()))
    err = [100 * float(r["error"]) for r in rows]
    old = [100 * float(r["wave_law_error"]) for r in rows]
    gpus = sorted({r["gpu"].split(" SXM")[0] for r in rows})
    per = ", ".join(f"{g} {_mean_abs([e for e, r in zip(err, rows) if r['gpu'].startswith(g)]):.1f}" for g in gpus)
    return (f"{len(rows)} (model, GPU)", f"{_mean_abs(err):.1f}% ({per})", f"{max(map(abs, err)):.1f}%",
            f"{_mean_abs(old):.1f}% (wave law)")


LAMBDA_SHORT = {"A100 80GB SXM4": "A100", "Quadro RTX 8000": "RTX 8000", "RTX 3090": "3090", "RTX A6000": "A6000",
                "V100 16GB": "V100", "B200 192GB": "B200", "GH200 96GB": "GH200", "H200 140GB": "H200"}


def _lambda_cells(precision: str) -> Callable[[], tuple[str, str, str, str]]:
    """Training throughput per sample against Lambda's published dev rows, drift-free (benchmarks/crossarch/
    lambda_published.py --traces: our H100 recordings of Lambda's steps), per GPU, beside no change (H100 = GPU)."""
    def cells() -> tuple[str, str, str, str]:
        rows = [r for r in csv.DictReader((RESULTS / "lambda_published.csv").open()) if r["precision"] == precision]
        err = [100 * float(r["error"]) for r in rows]
        short = {r["gpu"]: LAMBDA_SHORT.get(r["gpu"], r["gpu"]) for r in rows}
        per = ", ".join(f"{short[g]} {_mean_abs([e for e, r in zip(err, rows) if r['gpu'] == g]):.1f}"
                        for g in dict.fromkeys(r["gpu"] for r in rows))
        none = [100 * (float(r["h100_throughput"]) / float(r["throughput"]) - 1) for r in rows]
        return (f"{len(rows)} (model, GPU)", f"{_mean_abs(err):.1f}% ({per})", f"{max(map(abs, err)):.1f}%",
                f"{_mean_abs(none):.1f}% (no change)")
    return cells


# benchmarks/results/scaleout/: ten sessions on H100 hosts of 4 and 2 GPUs (the b sessions held out of every fit; the c
# sessions recorded after every fit, and not used to build the change they were first scored with; the d and e sessions,
# 2026-11-27, three workloads no fit read, recorded before the change they were first scored with; the f session, three
# more such workloads, recorded after the disturbed-step rule; g after the fixed host unit; h and 2e, three more,
# recorded before the afternoon's buffer broadcast, collective spin and FSDP units of changing width; i, three more,
# after them; j, k, 2f and l the evening's, each recorded before the code that scores it was final; five new workloads
# among them; m the night's, three more new workloads, recorded before any change of that session; n after its
# changes, two more new workloads; o, 2026-11-27 23:40 UTC, three more new workloads, recorded and scored with no model
# change since n; 2g, 2026-11-28 00:15 UTC on a 2x H100 host, three more, after the base-clock floor, which no N-GPU
# path reads; 2h, 00:25 UTC on another 2x H100 host, three more, no change since)
SCALEOUT_RUNS = ("h100x4-20261126", "h100x2-20261126", "h100x4-fsdp1-20261126", "h100x2b-20261126",
                 "h100x4b-20261126", "h100x2c-20261126", "h100x4c-20261126", "h100x4d-20261127", "h100x2d-20261127",
                 "h100x4e-20261127", "h100x4f-20261127", "h100x4g-20261127", "h100x4h-20261127",
                 "h100x2e-20261127", "h100x4i-20261127", "h100x4j-20261127", "h100x4k-20261127",
                 "h100x2f-20261127", "h100x4l-20261127", "h100x4m-20261127", "h100x4n-20261127",
                 "h100x4o-20261127", "h100x2g-20261128",
                 "h100x2h-20261128", "h100x4p-20261128", "h100x2i-20261128", "h100x4q-20261128")


def _scaleout_rows() -> list[dict[str, str]]:
    return [r for run in SCALEOUT_RUNS for r in csv.DictReader((RESULTS / "scaleout" / f"{run}.csv").open())
            if r["status"] == "ok"]


def _dp_cells(rows: list[dict[str, str]], err: str, inside: str, base: str, base_name: str
              ) -> tuple[str, str, str, str]:
    """The cells of a data-parallel row: ``rows`` scored by column ``err`` (a fraction), the share whose ``inside``
    column is True, beside the baseline column ``base`` (named ``base_name``)."""
    e = [100 * float(r[err]) for r in rows]
    held = sum(r[inside] == "True" for r in rows)
    return (f"{len(rows)} (workload, strategy, ranks), {100 * held / len(rows):.0f}% inside its range",
            f"{_mean_abs(e):.1f}%", f"{max(map(abs, e)):.1f}%",
            f"{_mean_abs([100 * float(r[base]) for r in rows]):.1f}% ({base_name})")


def _scaleout_cells() -> tuple[str, str, str, str]:
    """The N-rank step predicted from the one-GPU trace against the measured one (benchmarks/scaleout_eval.py on the
    2026-11-26/27/28 recordings of twenty-six H100 host sessions), its range's coverage, beside the one-GPU step as the
    prediction."""
    return _dp_cells(_scaleout_rows(), "scaleout_err", "in_range", "no_change_err", "one-GPU step")


def _crosshost_cells() -> tuple[str, str, str, str]:
    """The same N-rank steps predicted from one-GPU traces recorded on another H100 host on 2026-12-06
    (benchmarks/scaleout_crosshost.py), beside that host's one-GPU step as the prediction."""
    rows = list(csv.DictReader((RESULTS / "scaleout" / "crosshost-20261206.csv").open()))
    return _dp_cells(rows, "scaleout_err", "in_range", "no_change_new_err", "that one-GPU step")


def _joint_cells() -> tuple[str, str, str, str]:
    """The joint replay of the measured rank traces (compare DIR's origin row) against the same measurements."""
    rows = [r for r in _scaleout_rows() if r.get("joint_err")]
    return _dp_cells(rows, "joint_err", "joint_in_range", "no_change_err", "one-GPU step")


def timm_section() -> str:
    """docs/accuracy.md's timm tables: benchmarks/results/timm_published.md from its first table to the P sweep, its
    headings one level down."""
    text = (RESULTS / "timm_published.md").read_text()
    end = text.find("## Choosing P")
    body = text[text.index("## Per origin"):end if end >= 0 else len(text)].rstrip("\n") + "\n"
    return body.replace("## ", "#### ")


ACC = "docs/accuracy.md"
ACCURACY_ROWS = [
    AccuracyRow("step GPU time, another GPU (H100 ↔ H200)", "H100 SXM, H200", _step_cells("cross-GPU"),
                f"[cross-GPU]({ACC}#what-was-measured)"),
    AccuracyRow("step GPU time, fewer SMs on the same GPU (132 → 100/64/48)", "H100 SXM, H200",
                _step_cells("SM-scaled"), f"[SM-scaled]({ACC}#what-was-measured)"),
    AccuracyRow("step GPU time, another GPU with fewer SMs", "H100 SXM, H200", _step_cells("both"),
                f"[both]({ACC}#what-was-measured)"),
    AccuracyRow("step GPU time, all of the above", "H100 SXM, H200", _step_cells(None),
                "[per pair](benchmarks/results/accuracy.md)"),
    AccuracyRow("iteration time of the real loop (no profiler), same host, fewer SMs", "H100 SXM, H200",
                _iteration_cells("iteration_error_pct", True), f"[iteration]({ACC}#iteration-time)"),
    AccuracyRow("iteration time of the real loop, any pair, target host's speed given (`--cpu-speed`)",
                "H100 SXM, H200", _iteration_cells("host_matched_iteration_error_pct", False),
                f"[iteration]({ACC}#iteration-time)"),
    AccuracyRow("the same, launch-bound pairs only", "H100 SXM, H200",
                _iteration_cells("host_matched_iteration_error_pct", False, True), f"[iteration]({ACC}#iteration-time)"),
    AccuracyRow("origin row (`compare`'s first row): the real loop from a plain trace, launch-bound", "H100 SXM, H200",
                _origin_cells("profiler_overhead/origin_rows.csv"),
                f"[origin row]({ACC}#the-origin-row-and-its-range)"),
    AccuracyRow("speed-up between two settings, target host's speed given", "H100 SXM, H200",
                _iteration_cells("host_matched_speedup_error_pct", False), f"[iteration]({ACC}#iteration-time)"),
    AccuracyRow("held out (6 new workloads incl. HF Llama, T5, a decode loop, timm; 132 → 80/40 SMs): step GPU time",
                "H100 SXM, H200", _step_cells(None, lambda: heldout_rows("heldout")),
                f"[held out]({ACC}#held-out-re-measurement)"),
    AccuracyRow("held out: iteration time, same host, fewer SMs, plain torch.profiler trace", "H100 SXM, H200",
                _iteration_cells("iteration_error_pct", True, source=lambda: heldout_rows("heldout-plain")),
                f"[held out]({ACC}#held-out-re-measurement)"),
    AccuracyRow("held out: the same, trace recorded with `habitat_trace.schedule`", "H100 SXM, H200",
                _iteration_cells("iteration_error_pct", True, source=lambda: heldout_rows("heldout")),
                f"[held out]({ACC}#held-out-re-measurement)"),
    AccuracyRow("held out (20 launch-bound workloads, 4-6 recordings each, two hosts; one-GPU steps of the DDP runs; "
                "2026-11-26): the origin row, launch-bound", "H100 SXM", _origin_cells("launch_bound/range_rows.csv"),
                f"[origin row]({ACC}#the-origin-row-and-its-range)"),
    AccuracyRow("held out: the same steps' targets on the same host, fewer SMs, with your measured step given "
                "(`--measured-step`)", "H100 SXM", _anchor_cells, f"[your step]({ACC}#your-measured-step)"),
    AccuracyRow("held out: iteration time, any pair, target host's speed given, plain trace", "H100 SXM, H200",
                _iteration_cells("host_matched_iteration_error_pct", False, source=lambda: heldout_rows("heldout-plain")),
                f"[held out]({ACC}#held-out-re-measurement)"),
    AccuracyRow("iteration time across generations, fp16 AMP inference (timm's dev models, batch 1024; rows measured "
                "on re-parameterized models left out), from an H100 trace", "RTX 3090, 4090, 5090 (timm's published "
                "tables)", _timm_cells("H100"),
                f"[timm]({ACC}#mixed-precision-across-generations-timms-published-tables)"),
    AccuracyRow("the same from an H200 trace", "RTX 3090, 4090, 5090 (published)", _timm_cells("H200"),
                f"[timm]({ACC}#mixed-precision-across-generations-timms-published-tables)", "timm from an H200 trace"),
    AccuracyRow("the same at batch 2048 from an H100 trace (a 300 W card)", "RTX PRO 6000 Blackwell Max-Q (published)",
                _timm_cells("H100 (batch 2048)"),
                f"[timm]({ACC}#mixed-precision-across-generations-timms-published-tables)",
                "timm at batch 2048 from an H100 trace"),
    AccuracyRow("the same at batch 2048 from an H200 trace", "RTX PRO 6000 Blackwell Max-Q (published)",
                _timm_cells("H200 (batch 2048)"),
                f"[timm]({ACC}#mixed-precision-across-generations-timms-published-tables)", "timm at batch 2048"),
    AccuracyRow("iteration time across generations, fp16 AMP *training* (ResNet50 v1.5 b256, ResNeXt101-32x4d b128), "
                "from an H100 trace; held out", "A100, V100 (NVIDIA DeepLearningExamples' tables)", _train_cells,
                f"[training]({ACC}#mixed-precision-training-across-generations-nvidias-published-tables)"),
    AccuracyRow("training throughput per sample across generations, AMP (Lambda's ResNet50, BERT base/large SQuAD at "
                "each GPU's batch), from our H100 recordings of the same steps; dev split", "A100, V100, RTX 3090, A6000, "
                "Quadro RTX 8000, H200, GH200, B200 (Lambda's tables)", _lambda_cells("amp"),
                f"[Lambda]({ACC}#training-throughput-across-generations-lambdas-published-tables-issue-32)"),
    AccuracyRow("the same in TF32 (the containers' FP32)", "the same GPUs", _lambda_cells("tf32"),
                f"[Lambda]({ACC}#training-throughput-across-generations-lambdas-published-tables-issue-32)"),
    AccuracyRow("origin invariance: one model from an H100 and from an H200 trace, difference of the predictions",
                "RTX 3090, 4090, 5090", _invariance_cells,
                f"[timm]({ACC}#mixed-precision-across-generations-timms-published-tables)", "origin invariance"),
    AccuracyRow("data-parallel step from a one-GPU trace (`--world-size 2/4`), DDP, FSDP2, FSDP1; 52 workloads; each "
                "session's own trace, scored by the model of 2026-11-28 (the traces are not kept)",
                "2x and 4x H100 SXM (NVLink), twenty-six host sessions", _scaleout_cells,
                "[scale-out](docs/distributed.md#results-2x-and-4x-h100-sxm-2026-11-26)"),
    AccuracyRow("the same steps from one-GPU traces recorded on another H100 host, 2026-12-06 (a user's trace, "
                "rented GPUs), today's model", "2x and 4x H100 SXM (NVLink), the twenty-six sessions' measured steps",
                _crosshost_cells, "[scale-out](docs/distributed.md#one-gpu-traces-from-another-host-2026-12-06)"),
    AccuracyRow("the same step from the rank traces replayed jointly (`compare DIR`)",
                "2x and 4x H100 SXM (NVLink), twenty-six host sessions", _joint_cells,
                "[scale-out](docs/distributed.md#results-2x-and-4x-h100-sxm-2026-11-26)"),
    AccuracyRow("step GPU time from an H100, NeuSight's FP32 workloads", "V100, T4, P100, P4 (published)",
                _neusight_cells("neusight_e2e.csv", ("V100 PCIe 32GB", "T4", "P100 PCIe 16GB", "P4"), "H100"),
                f"[generations]({ACC}#across-gpu-generations-neusights-workloads)"),
    AccuracyRow("the same from an H200 trace", "V100, T4, P100, P4 (published)",
                _neusight_cells("neusight_e2e.csv", ("V100 PCIe 32GB", "T4", "P100 PCIe 16GB", "P4"), "H200"),
                f"[generations]({ACC}#across-gpu-generations-neusights-workloads)", "NeuSight from an H200 trace"),
    AccuracyRow("step GPU time from an H100 to AMD, NeuSight's FP32 workloads", "MI100 (published)",
                _neusight_cells("neusight_amd.csv", None), f"[AMD]({ACC}#amd)"),
    AccuracyRow("FP32 GEMM kernel time on an unseen GPU (learned model)", "P100, P4, V100, T4, A100 PCIe",
                _logo_cells, "[docs/learned.md](docs/learned.md)"),
    AccuracyRow("FP32 GEMM kernel time from an older GPU to an H100 (cross-chip law; NeuSight's shapes timed on our "
                "H100)", "P100, P4, T4, V100, A100 PCIe → H100 SXM", _gemm_to_h100_cells,
                "[GEMMs to H100](docs/learned.md#the-cross-chip-law-on-gemm-kernels-issue-32)"),
]


def accuracy_summary() -> str:
    out = ["| what is predicted | measured on | sample | mean abs error | worst | baseline | details |",
           "|---|---|---:|---:|---:|---:|---|"]
    stale = []  # rows whose recordings are not in the repository: one line for all of them
    for row in ACCURACY_ROWS:
        cells = row.cells()
        if cells == NOT_RERUN:
            stale.append(row)
            continue
        n, mean, worst, base = cells
        out.append(f"| {row.task} | {row.gpus} | {n} | {mean} | {worst} | {base} | {row.details} |")
    if stale:
        out.append(f"| not re-run after issue 32 (their H200 recordings are not kept here): "
                   f"{'; '.join(r.short or r.task for r in stale)} | {'; '.join(dict.fromkeys(r.gpus for r in stale))} | - | - | - | "
                   f"- | {', '.join(dict.fromkeys(r.details for r in stale))} |")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Section:
    render: Callable[[], str]
    needs_shared: bool = False


SECTIONS: dict[str, Section] = {
    "compare-table": Section(compare_section, needs_shared=True),
    "accuracy-summary": Section(accuracy_summary),
    "accuracy-by-set": Section(lambda: _accuracy_module().summary(accuracy_rows())),
    "accuracy-by-class": Section(lambda: _accuracy_module().by_class(accuracy_rows())),
    "accuracy-iteration": Section(lambda: _accuracy_module().iteration_summary(accuracy_rows())),
    "accuracy-heldout": Section(heldout_section),
    "accuracy-timm": Section(timm_section),
    "range-heldout": Section(lambda: range_tables()[0]),
    "anchor-heldout": Section(lambda: range_tables()[1]),
}


def sections(text: str) -> dict[str, str]:
    """NAME -> body of every generated section in ``text``."""
    return {m["name"]: m["body"] for m in MARKER.finditer(text)}


def refresh(text: str, rendered: dict[str, str]) -> str:
    """``text`` with each generated section whose name is in ``rendered`` replaced by its new body."""
    unknown = set(sections(text)) - set(SECTIONS)
    if unknown:
        raise KeyError(f"generated sections with no generator: {sorted(unknown)}")
    return MARKER.sub(lambda m: m[1] + rendered.get(m["name"], m["body"]) + m[4], text)


def shared_present() -> bool:
    return (SHARED / "data" / "traces").is_dir()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a section is stale; write nothing")
    a = ap.parse_args()
    names = [n for n, s in SECTIONS.items() if shared_present() or not s.needs_shared]
    skipped = sorted(set(SECTIONS) - set(names))
    if skipped:
        print(f"../shared is absent ({SHARED}): left as they are: {', '.join(skipped)}", file=sys.stderr)
    rendered = {}
    for name in names:
        if name == "compare-table" and not a.check:
            rendered[name] = compare_section(plot_to=FIGURE)
        else:
            rendered[name] = SECTIONS[name].render()
    stale = []
    for path in DOCS:
        text = path.read_text()
        new = refresh(text, rendered)
        stale += [f"{path.relative_to(ROOT)}: {n}" for n, body in sections(text).items() if sections(new)[n] != body]
        if not a.check and new != text:
            path.write_text(new)
    if "compare-table" in rendered and figure_hash(FIGURE) != table_hash(compare_table_text(rendered["compare-table"])):
        stale.append(f"{FIGURE.relative_to(ROOT)}")
    if a.check:
        print("\n".join(f"stale: {s}" for s in stale) or "up to date")
        sys.exit(1 if stale else 0)
    print("\n".join(f"rewrote: {s}" for s in stale) or "already up to date")


if __name__ == "__main__":
    main()

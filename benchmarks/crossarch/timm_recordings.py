"""Two recordings of one GPU, one prediction (issue 32): timm's dev models recorded again on another H100 on another
day predict timm's published tables as the shared recording does (benchmarks/crossarch/timm_published.py's H100 row).

    python benchmarks/crossarch/timm_recordings.py DIR [--shared ../shared] [--out benchmarks/results]

DIR: benchmarks/collect/collect_timm.py's output (batch 1024, measured.csv and one trace per model) from a lent H100;
the shared set is ../shared/data/timm-published/h100 (2026-11-24). Per target GPU: each recording's mean |error| against
the published step (rows that measured another program left out, as timm_published.py does), and the two predictions'
mean |ratio - 1|: what re-recording the same step on the same kind of GPU moves, beside what it moves the origin's own
measured step. Writes benchmarks/results/timm_recordings.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import timm_published as T  # noqa: E402

SHARED, AGAIN = "H100 (shared, 2026-11-24)", "H100 (again)"


def compare_recordings(shared: Path, again: Path) -> pd.DataFrame:
    """Both recordings' predictions of every dev model on timm's batch-1024 GPUs, scored against the tables."""
    pred = pd.concat([T.predict_set(SHARED, shared, T.B1024_TARGETS, False),
                      T.predict_set(AGAIN, again, T.B1024_TARGETS, False)], ignore_index=True)
    return T.score(pred, T.published(shared.parent))


def markdown(m: pd.DataFrame, again: Path) -> str:
    m = m[~m["other_program"]]
    wide = m.pivot_table(index=["model", "gpu"], columns="origin", values=["predicted_ms", "origin_measured_ms"])
    both = wide.dropna()
    ratio = both["predicted_ms", AGAIN] / both["predicted_ms", SHARED] - 1
    step = both["origin_measured_ms", AGAIN] / both["origin_measured_ms", SHARED] - 1
    lines = [f"# timm's dev models from two H100 recordings (benchmarks/crossarch/timm_recordings.py)\n",
             f"`{again.name}` recorded again with benchmarks/collect/collect_timm.py; error = predicted / published "
             "- 1, rows that measured another program left out.\n",
             "| target | models | shared recording: mean abs error | again: mean abs error | predictions: mean abs "
             "ratio - 1 | origin's measured step: mean abs ratio - 1 |", "|---|---:|---:|---:|---:|---:|"]
    for gpu, q in m.groupby("gpu"):
        idx = ratio.index.get_level_values("gpu") == gpu
        e = {o: q[q["origin"] == o]["error"].abs().mean() for o in (SHARED, AGAIN)}
        lines.append(f"| {gpu} | {idx.sum()} | {100 * e[SHARED]:.1f}% | {100 * e[AGAIN]:.1f}% | "
                     f"{100 * ratio[idx].abs().mean():.1f}% | {100 * step[idx].abs().mean():.1f}% |")
    worst = ratio.abs().sort_values(ascending=False).head(3)
    lines += ["", "Largest moves: " + ", ".join(f"{mdl} on {g} {100 * ratio[(mdl, g)]:+.1f}%" for mdl, g in worst.index)
              + "\n"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("again", type=Path)
    ap.add_argument("--shared", type=Path, default=T.ROOT.parent / "shared")
    ap.add_argument("--out", type=Path, default=T.ROOT / "benchmarks" / "results")
    a = ap.parse_args()
    text = markdown(compare_recordings(a.shared / "data" / "timm-published" / "h100", a.again), a.again)
    (a.out / "timm_recordings.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

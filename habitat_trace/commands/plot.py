"""``plot_compare(table, path)``: a PNG of a ``compare`` table — iteration time and cost per 1k iterations per GPU.

matplotlib (the ``plot`` extra) is imported here only, with the Agg backend (no display needed). The PNG is
written to a temporary file in the target directory and renamed over ``path``: no half-written file.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from habitat_trace.errors import HabitatTraceError, OutputError

ORIGIN_COLOR, TARGET_COLOR, MISSING_COLOR = "#d62728", "#1f77b4", "#bbbbbb"


def check_plot_path(path: Path) -> None:
    """Fail before any work when the PNG cannot be written or matplotlib is missing."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise OutputError(f"{path}: --plot writes a PNG; give a path ending in .png")
    if not path.parent.resolve().is_dir():
        raise OutputError(f"{path}: directory {path.parent} does not exist; create it first")
    _pyplot()


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise HabitatTraceError("--plot needs matplotlib: pip install 'habitat-trace[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_compare(table: Any, path: Path, title: str = "") -> None:
    plt = _pyplot()
    names = [f"{g} (origin)" if i == 0 else str(g) for i, g in enumerate(table["gpu"])]
    colors = [ORIGIN_COLOR] + [TARGET_COLOR] * (len(names) - 1)
    fig, (ax_t, ax_c) = plt.subplots(1, 2, figsize=(11, 0.5 * len(names) + 1.8), sharey=True)
    y = list(range(len(names)))
    ax_t.barh(y, table["iteration_ms"], color=colors)
    for i, (ms, bound) in enumerate(zip(table["iteration_ms"], table["bound"])):
        ax_t.annotate(f" {ms:.1f} ms" + (" (launch-bound)" if bound == "launch" else ""), (ms, i), va="center",
                      fontsize=8)
    ax_t.set_xlabel("predicted iteration time (ms)")
    ax_t.set_yticks(y, names)
    ax_t.invert_yaxis()
    cost = table["usd_per_1k_iterations"].astype(float)
    known = cost.notna()
    ax_c.barh(y, cost.fillna(0.0), color=[c if k else MISSING_COLOR for c, k in zip(colors, known)])
    for i, (c, ok, fitsmem) in enumerate(zip(cost, known, table["fits_memory"])):
        label = f" ${c:.3f}" if ok else " no price"
        ax_c.annotate(label + ("" if fitsmem is None or fitsmem else " (does not fit memory)"), (c if ok else 0.0, i), va="center",
                      fontsize=8)
    ax_c.set_xlabel("cost per 1,000 iterations (USD, on-demand)")
    for ax in (ax_t, ax_c):
        ax.margins(x=0.3)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title or "habitat-trace compare", fontsize=10)
    fig.tight_layout()
    _save_atomic(fig, Path(path))
    plt.close(fig)


def _save_atomic(fig: Any, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fig.savefig(fh, format="png", dpi=120)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""``plot_compare(table, path)``: a PNG of a ``compare`` table — iteration time and cost per 1k iterations per GPU.

matplotlib (the ``plot`` extra) is imported here only, with the Agg backend (no display needed). The PNG is
written by ``emit.writer.write_bytes`` (temporary file renamed over ``path``, mode 0666 & ~umask like the traces).
The time axis is logarithmic when the slowest GPU is more than ``LOG_RATIO`` times the fastest (a T4 at 2,894 ms
squashed the H100/H200/B200 bars into slivers), and ends ``LOG_HEADROOM`` times past the slowest: a bar reaching
past the axis' middle carries its label inside (the axis ran to 10^4 ms for a slowest 528 ms, to fit the labels
outside: issue 33, item 9). A GPU whose peak memory does not fit is hatched in both panels. The title says what a
row is (one of N synthesized ranks, the slowest of a run's ranks): the caller's.
"""
from __future__ import annotations

import io
import math
import os
from pathlib import Path
from typing import Any

from habitat_trace.errors import HabitatTraceError, OutputError

ORIGIN_COLOR, TARGET_COLOR, MISSING_COLOR = "#d62728", "#1f77b4", "#bbbbbb"
LOG_RATIO = 10.0  # slowest / fastest above which bars on a linear axis leave the fast GPUs unreadable
LOG_HEADROOM = 2.0  # the log axis ends this many times past the slowest bar
INSIDE = 0.5  # a bar ending past this fraction of the axis carries its label inside
NO_FIT = "does not fit memory"
NO_FIT_HATCH = "//"


def check_plot_path(path: Path) -> None:
    """Fail before any work when the PNG cannot be written or matplotlib is missing."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise OutputError(f"{path}: --plot writes a PNG; give a path ending in .png")
    if not path.parent.resolve().is_dir():
        raise OutputError(f"{path}: directory {path.parent} does not exist; create it first")
    if not os.access(path.parent.resolve(), os.W_OK | os.X_OK):
        raise OutputError(f"{path}: directory {path.parent} is not writable; fix its permissions or choose another "
                          "--plot")
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
    from habitat_trace.emit.writer import write_bytes

    plt = _pyplot()
    fig = compare_figure(table, title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    write_bytes(buf.getvalue(), Path(path))


def compare_figure(table: Any, title: str = "") -> Any:
    """The figure: iteration time (log axis when the range is wide) and cost per 1k iterations per GPU."""
    plt = _pyplot()
    names = [f"{g} (origin)" if i == 0 else str(g) for i, g in enumerate(table["gpu"])]
    colors = [ORIGIN_COLOR] + [TARGET_COLOR] * (len(names) - 1)
    fits = [bool(f) for f in table["fits_memory"]]
    hatches = ["" if f else NO_FIT_HATCH for f in fits]
    fig, (ax_t, ax_c) = plt.subplots(1, 2, figsize=(11, 0.32 * len(names) + 2.2), sharey=True, layout="constrained")
    y = list(range(len(names)))
    ms = table["iteration_ms"].astype(float)
    log = ms.min() > 0 and ms.max() / ms.min() > LOG_RATIO
    ax_t.barh(y, ms, color=colors, hatch=hatches, edgecolor="white")
    lo, hi = ms.min() / 2, ms.max() * LOG_HEADROOM
    for i, (t, bound, ok) in enumerate(zip(ms, table["bound"], fits)):
        note = (" (launch-bound)" if bound == "launch" else "") + ("" if ok else f" ({NO_FIT})")
        inside = log and math.log(t / lo) > INSIDE * math.log(hi / lo)
        ax_t.annotate(f"{t:,.1f} ms{note} " if inside else f" {t:,.1f} ms{note}", (t, i), va="center", fontsize=8,
                      ha="right" if inside else "left", color="white" if inside else "black")
    if log:
        ax_t.set_xscale("log")
    ax_t.set_xlabel("predicted iteration time, ms" + (" (log scale)" if log else "") + ": lower is better")
    ax_t.set_yticks(y, names)
    ax_t.invert_yaxis()
    cost = table["usd_per_1k_iterations"].astype(float)
    known = cost.notna()
    ax_c.barh(y, cost.fillna(0.0), color=[c if k else MISSING_COLOR for c, k in zip(colors, known)], hatch=hatches,
              edgecolor="white")
    for i, (c, ok, fitsmem) in enumerate(zip(cost, known, fits)):
        label = f" ${c:.3f}" if ok else " no price"
        ax_c.annotate(label + ("" if fitsmem is None or fitsmem else f" ({NO_FIT})"), (c if ok else 0.0, i), va="center", fontsize=8)
    ax_c.set_xlabel("cost per 1,000 iterations, USD on-demand: lower is better")
    for ax in (ax_t, ax_c):
        ax.margins(x=0.35)
        ax.grid(axis="x", alpha=0.3)
    if log:  # margins() works in data units: on a log axis the limits are set by hand
        ax_t.set_xlim(lo, hi)
    fig.suptitle(title or "habitat-trace compare", fontsize=10)  # constrained layout keeps it above the axes
    return fig

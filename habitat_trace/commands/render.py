"""One renderer for every command: a ``Report`` (named tables of rows, notes, warnings) printed as a table, JSON or
CSV, so every command takes every ``--format`` the same way.

- json: a report of one table is the list of its rows; a report of several is an object of such lists keyed by
  table name, plus ``warnings``. Numbers stay numbers; NaN and infinities are null.
- csv: one table with a header row; several one after the other, each under a ``# name`` line, a blank line
  between them. A cell holding a list or mapping is its JSON text; null is an empty cell.
- table: each table under its title, fitted to the terminal (80 columns and wider; piped: ``PIPE_WIDTH`` unless
  COLUMNS says otherwise): headers shorten, then the columns marked ``drop`` are left out, highest first, and a
  note names them (json and csv keep them); figures are never cut or wrapped, names fold. Text is printed as it
  is, never read as rich markup ("[memory]" stays).
Warnings go to stderr as ``warning: ...`` lines, in every format, unless -q.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional, TextIO, Union

import pandas as pd

from habitat_trace.errors import UsageError

FORMATS = ("table", "json", "csv")
PIPE_WIDTH = 200  # stdout piped, no COLUMNS: wide enough for every table (rich would use 80)
MIN_TEXT_WIDTH = 12  # a folding name column is not squeezed below this
SEP_WIDE = SEP_NARROW = 3  # characters each column adds: a cell padding on each side and a rule (or a space)


@dataclass(frozen=True)
class Column:
    """How a table shows one column of the rows (json and csv show every column, by its key)."""

    key: str
    header: str
    fmt: Union[str, Callable[[Any], str]] = ""  # a format spec for the value, or a function of it
    short: Optional[str] = None  # the header once the table is narrowed
    text: bool = False  # left-aligned and may fold (names); figures are right-aligned and never fold
    drop: int = 0  # > 0: left out, highest first, when the table does not fit
    optional: bool = False  # left out when every value is null (e.g. per-rank columns of a single trace)
    missing: str = "-"  # shown for null
    of: Optional[Callable[[dict[str, Any]], Any]] = None  # the value from the whole row, instead of row[key]

    def cell(self, row: dict[str, Any]) -> str:
        v = plain(self.of(row) if self.of is not None else row.get(self.key))
        if v is None:
            return self.missing
        if callable(self.fmt):
            return self.fmt(v)
        return format(v, self.fmt) if self.fmt else str(v)


@dataclass(frozen=True)
class Table:
    name: str  # the JSON key and CSV section
    title: str
    rows: pd.DataFrame
    columns: tuple[Column, ...] = ()  # what the table shows; () shows every column under its key
    printed: bool = True  # False: json and csv only (a table that would say nothing more in the table format)

    def __post_init__(self) -> None:
        """A column shown as an integer ("d") holds integers in every format, null where absent: pandas made a
        rank column float (0.0 in the CSV, and "d" failed on it) when one trace of a directory had no rank."""
        ints = [c.key for c in self.columns if c.fmt == "d" and c.of is None and c.key in self.rows.columns]
        if ints:
            object.__setattr__(self, "rows", self.rows.astype({k: "Int64" for k in ints}))


@dataclass(frozen=True)
class Report:
    tables: tuple[Table, ...]
    notes: tuple[str, ...] = ()  # printed under the tables (table format)
    warnings: tuple[str, ...] = ()  # travel with the result: stderr lines, and "warnings" in a JSON object


def range_cell(row: dict[str, Any], key: str = "iteration") -> Optional[str]:
    """A figure's range as "low-high" (ms, 2 decimals) from ``<key>_low_ms`` and ``<key>_high_ms`` (pipeline.run.
    Headline: what the trace cannot tell); null, shown as the column's ``missing``, when it is a point."""
    lo, hi = plain(row.get(f"{key}_low_ms")), plain(row.get(f"{key}_high_ms"))
    if lo is None or hi is None or f"{lo:.2f}" == f"{hi:.2f}":
        return None
    return f"{lo:.2f}-{hi:.2f}"


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    return fmt


def plain(v: Any) -> Any:
    """A cell as plain JSON data: numpy scalars as Python numbers, NaN and infinities as None, containers too."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)) or type(v).__name__ == "ndarray":
        return [plain(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): plain(v) for k, v in r.items()} for r in rows.to_dict(orient="records")]


def render(report: Report, fmt: str, out: Optional[TextIO] = None, warn: bool = True) -> None:
    """Print ``report`` in ``fmt`` on ``out`` (stdout), its warnings on stderr (``warn``: unless -q)."""
    out = out or sys.stdout
    if warn:
        for w in report.warnings:
            sys.stderr.write(f"warning: {w}\n")
    if fmt == "json":
        out.write(to_json(report) + "\n")
    elif fmt == "csv":
        out.write(to_csv(report))
    else:
        print_tables(report, out)
    out.flush()


def to_json(report: Report) -> str:
    if len(report.tables) == 1:
        return json.dumps(records(report.tables[0].rows), indent=2, allow_nan=False)
    doc: dict[str, Any] = {t.name: records(t.rows) for t in report.tables}
    doc["warnings"] = list(report.warnings)
    return json.dumps(doc, indent=2, allow_nan=False)


def to_csv(report: Report) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for i, t in enumerate(report.tables):
        if len(report.tables) > 1:
            buf.write(("\n" if i else "") + f"# {t.name}\n")
        writer.writerow([str(c) for c in t.rows.columns])
        for rec in records(t.rows):
            writer.writerow(["" if v is None else json.dumps(v, sort_keys=True) if isinstance(v, (dict, list))
                             else v for v in rec.values()])
    return buf.getvalue()


def console_for(out: TextIO) -> Any:
    from rich.console import Console

    tty = hasattr(out, "isatty") and out.isatty()
    return Console(file=out, width=None if tty or os.environ.get("COLUMNS") else PIPE_WIDTH, highlight=False)


def print_tables(report: Report, out: TextIO) -> None:
    from rich.text import Text

    console = console_for(out)
    left_out: list[str] = []
    for t in report.tables:
        if t.printed and len(t.rows):  # an empty table says nothing a note does not (check's "ok")
            left_out += _print_table(console, t)
    for note in report.notes:
        console.print(Text(note))
    if left_out:
        names = ", ".join(dict.fromkeys(left_out))
        console.print(Text(f"Narrower than the table: {names} left out (--format json or csv has them)"))


def _print_table(console: Any, t: Table) -> list[str]:
    """Print one table fitted to the console; the headers of the columns left out."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    rows = records(t.rows)
    cols = [c for c in (t.columns or tuple(Column(k, k) for k in t.rows.columns))
            if not (c.optional and all(c.cell(r) == c.missing for r in rows))]
    cells = [[c.cell(r) for r in rows] for c in cols]
    shown, narrow = _fit(cols, cells, console.width)
    console.print(Text(t.title))  # above the table, not in it: a narrow table would wrap it
    rt = RichTable(box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD, pad_edge=not narrow)
    for j in shown:
        head = _head(cols[j], narrow)
        width = max([len(head)] + [Text(x).cell_len for x in cells[j]])
        rt.add_column(head, justify="left" if cols[j].text else "right", no_wrap=not cols[j].text,
                      overflow="fold", min_width=None if cols[j].text else width)
    for i in range(len(rows)):
        rt.add_row(*(Text(cells[j][i]) for j in shown))
    console.print(rt)
    return [c.header for j, c in enumerate(cols) if j not in shown]


def _head(c: Column, narrow: bool) -> str:
    return (c.short or c.header) if narrow else c.header


def _fit(cols: list[Column], cells: list[list[str]], width: int) -> tuple[list[int], bool]:
    """The positions of the columns to show and whether the table is narrowed (short headers, light box): all
    when they fit; else the ``drop`` columns leave, highest first, until the rest fits (text columns fold down
    to MIN_TEXT_WIDTH)."""
    def natural(j: int, narrow: bool) -> int:
        return max([len(_head(cols[j], narrow))] + [len(x) for x in cells[j]])

    def need(shown: list[int]) -> int:
        return sum(min(natural(j, True), max(MIN_TEXT_WIDTH, len(_head(cols[j], True)))) if cols[j].text
                   else natural(j, True) for j in shown) + len(shown) * SEP_NARROW

    every = list(range(len(cols)))
    if sum(natural(j, False) for j in every) + len(cols) * SEP_WIDE + 1 <= width:
        return every, False
    shown = list(every)
    for j in sorted((j for j in every if cols[j].drop > 0), key=lambda j: -cols[j].drop):
        if need(shown) <= width:
            break
        shown.remove(j)
    return shown, True

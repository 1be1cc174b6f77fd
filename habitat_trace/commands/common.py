"""What every command shares: progress on a terminal, -q-aware messages, and one rule for a directory with traces
that cannot be read: the command does the others, its report lists the bad ones, and it exits with the first bad
one's error (``ReportedError``: the report is printed first). ``inspect``, ``compare DIR`` and ``explain DIR`` stopped
at the first bad file while ``scale DIR`` did the rest (issue 33, item 6).

-q (the CLI sets the root logger to ERROR) means errors only: ``note`` prints nothing, and the progress display
is off (the renderer prints a result's warnings unless -q). The progress display goes to stderr and only when stderr is a terminal; it is gone
(cleared) before a command prints its result, so a table never lands beside a spinner.
"""
from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import typer

from habitat_trace.errors import HabitatTraceError

if TYPE_CHECKING:
    from habitat_trace.commands.render import Report
    from habitat_trace.pipeline import Options, Run
    from habitat_trace.pipeline.run import Unread


def quiet() -> bool:
    return not logging.getLogger().isEnabledFor(logging.WARNING)


def note(line: str, err: bool = False) -> None:
    """A command's one-line result (``scale``'s summary, ``check``'s ok): silent under -q."""
    if not quiet():
        typer.echo(line, err=err)


@contextmanager
def progress(what: str) -> Iterator[Callable[[str], None]]:
    """A spinner with a description on stderr when stderr is a terminal and -q is off; yields a function that
    sets the description (and, for -v, logs at INFO the time the previous step took, and the new step)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    log = logging.getLogger("habitat_trace.cli")
    show = sys.stderr.isatty() and not quiet()
    columns = (SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True, highlight=False), transient=True, disable=not show) as bar:
        task = bar.add_task(what, total=None)
        current, started = [what], [time.perf_counter()]
        log.info("%s", what)

        def step(description: str) -> None:
            now = time.perf_counter()
            log.info("%s (%.2f s)", current[0], now - started[0])
            log.info("%s", description)
            current[0], started[0] = description, now
            bar.update(task, description=description)

        yield step
        log.info("%s (%.2f s)", current[0], time.perf_counter() - started[0])


def read(path: Any, options: "Options", one: bool = False) -> tuple[list["Run"], list["Unread"], int]:
    """The runs of a trace or directory (``one``: the one run a command reads), the traces that could not be read,
    and how many traces there were; the first error when none could be read."""
    from habitat_trace.pipeline.run import Run, one_run

    runs, unread = Run.read(path, options)
    if not runs:
        raise unread[0].error
    return ([one_run(runs, path)] if one else runs), unread, len(unread) + sum(len(r.ranks) for r in runs)


class ReportedError(HabitatTraceError):
    """An error that comes with the report of what was done before it or without it (printed first); its exit code
    is the first failure's."""

    def __init__(self, report: "Report", message: str, exit_code: int = HabitatTraceError.exit_code) -> None:
        super().__init__(message)
        self.report = report
        self.exit_code = exit_code


def finish(report: "Report", unread: Sequence["Unread"], path: Any, total: int) -> "Report":
    """``report`` when every trace was read; else ReportedError (module doc), the report warning of each trace that
    was not read."""
    if not unread:
        return report
    import dataclasses

    first = unread[0]
    listed = dataclasses.replace(report, warnings=report.warnings + tuple(f"not read: {u.error}" for u in unread))
    raise ReportedError(listed, f"{path}: {len(unread)} of {total} traces could not be read; the report covers the "
                                f"others (first: {first.error})", first.error.exit_code)

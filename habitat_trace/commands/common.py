"""What every command shares: progress on a terminal, and -q-aware messages.

-q (the CLI sets the root logger to ERROR) means errors only: ``note`` prints nothing, and the progress display
is off (the renderer prints a result's warnings unless -q). The progress display goes to stderr and only when stderr is a terminal; it is gone
(cleared) before a command prints its result, so a table never lands beside a spinner.
"""
from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import typer


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

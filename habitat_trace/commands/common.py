"""What every command shares: ``--to`` parsing, progress on a terminal, and -q-aware messages.

-q (the CLI sets the root logger to ERROR) means errors only: ``note`` and ``warn`` print nothing, and the
progress display is off. The progress display goes to stderr and only when stderr is a terminal.
"""
from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import typer

from habitat_trace.errors import SpecError

ALL = "all"


def target_names(to: list[str] | str, catalog: Any) -> list[str]:
    """``--to`` values (repeated, comma-separated, or ``all``) -> catalog names, in order, each once.
    Unknown names fail here (SpecError with close matches), before any trace is read."""
    raw = [n.strip() for item in ([to] if isinstance(to, str) else to) for n in item.split(",") if n.strip()]
    if not raw:
        raise SpecError("--to: name at least one GPU, e.g. --to H100,A100,L4 (or --to all)")
    names: list[str] = []
    for n in raw:
        for name in ([s.name for s in catalog.specs] if n.lower() == ALL else [catalog.resolve(n).name]):
            if name not in names:
                names.append(name)
    return names


def quiet() -> bool:
    return not logging.getLogger().isEnabledFor(logging.WARNING)


def note(line: str, err: bool = False) -> None:
    """A command's one-line result (``scale``'s summary, ``check``'s ok): silent under -q."""
    if not quiet():
        typer.echo(line, err=err)


def warn(line: str) -> None:
    if not quiet():
        typer.echo(f"warning: {line}", err=True)


@contextmanager
def progress(what: str) -> Iterator[Callable[[str], None]]:
    """A spinner with a description on stderr when stderr is a terminal and -q is off; yields a function that
    sets the description (and logs the step at INFO with the time the previous one took, for -v)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    log = logging.getLogger("habitat_trace.cli")
    show = sys.stderr.isatty() and not quiet()
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True, disable=not show) as bar:
        task = bar.add_task(what, total=None)
        current, started = [what], [time.perf_counter()]
        log.info("%s", what)

        def step(description: str) -> None:
            now = time.perf_counter()
            log.info("%s (%.2f s); %s", current[0], now - started[0], description)
            current[0], started[0] = description, now
            bar.update(task, description=description)

        yield step
        log.info("%s (%.2f s)", current[0], time.perf_counter() - started[0])

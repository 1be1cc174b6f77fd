"""One exception hierarchy for everything a user can get wrong.

Every message names the file (or event, or GPU) and says what to do. The CLI prints
``error: <message>`` on one line and exits with the class's ``exit_code``; no traceback.
"""
from __future__ import annotations


class HabitatTraceError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with (documented in the README)."""

    exit_code = 1


class UsageError(HabitatTraceError):
    """An option's value is out of its range or malformed (--world-size 0, --format xml, --price L4): the exit code
    of the command line's own usage errors (click's), so that every bad option value exits alike."""

    exit_code = 2


class TraceFormatError(HabitatTraceError):
    """The input trace is missing, unreadable, or not a Kineto trace we can use."""

    exit_code = 2


class UnsupportedTraceError(TraceFormatError):
    """A valid trace we deliberately do not handle (CPU-only, AMD/ROCm)."""

    exit_code = 3


class SpecError(HabitatTraceError):
    """A GPU name or a --specs file is wrong (unknown GPU, bad field, bad base)."""

    exit_code = 4


class OutputError(HabitatTraceError):
    """The output path is unusable (missing directory, same as the input)."""

    exit_code = 5


class Interrupted(BaseException):
    """A signal (Ctrl-C, SIGTERM) stopped work that writes several outputs: ``rows`` report the outputs written
    before it (none after it); the CLI prints them and exits ``exit_code`` (130 or 143). A BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` swallows it."""

    def __init__(self, rows: list, exit_code: int) -> None:
        super().__init__(f"interrupted after {len(rows)} outputs")
        self.rows = rows
        self.exit_code = exit_code

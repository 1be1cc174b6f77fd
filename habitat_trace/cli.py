"""Command-line interface. Heavy modules are imported inside each command so ``--help`` stays fast.

Every user error is a HabitatTraceError: printed as one ``error:`` line on stderr, exit code from
the error class (README, "Exit codes"); no traceback, no partial output file.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Predict a PyTorch training step on another GPU from a torch.profiler trace.")

INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE: a bug of ours, not the user's input
FormatOpt = typer.Option("table", "--format", help="table or json")
SpecsOpt = typer.Option(None, "--specs", help="extra GPU catalog (TOML, [gpus.\"NAME\"] tables; may use base=)")
# what-ifs for the target's collectives (scale/collective.py); default: the target's usual node from the catalog
InterconnectOpt = typer.Option(None, "--interconnect", help="what-if: nvlink or pcie between the GPUs of a node")
GpusPerNodeOpt = typer.Option(None, "--gpus-per-node", help="what-if: GPUs per node (default: the catalog's node)")
NodesOpt = typer.Option(None, "--nodes", help="what-if: nodes a collective's group spans")


@app.callback()
def _root(verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="more log output"),
          quiet: bool = typer.Option(False, "--quiet", "-q", help="errors only")) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s", stream=sys.stderr)


@app.command()
def inspect(trace: Path = typer.Argument(..., help="torch.profiler trace (.json or .json.gz)"),
            fmt: str = FormatOpt, top: int = typer.Option(10, "--top", help="how many top kernels")) -> None:
    """Summarize a trace: origin GPU, steps, CPU/GPU time per step, kernels by class, top kernels."""
    from habitat_trace.commands import inspect as cmd

    cmd.run(trace, fmt=fmt, top=top)


@app.command()
def gpus(specs: Optional[Path] = SpecsOpt, fmt: str = FormatOpt) -> None:
    """List the GPU catalog (with --specs entries)."""
    from habitat_trace.commands import gpus as cmd

    cmd.run(specs=specs, fmt=fmt)


@app.command()
def scale(trace: Path = typer.Argument(..., help="torch.profiler trace (.json or .json.gz)"),
          to: List[str] = typer.Option(..., "--to", help="target GPU (repeat for several)"),
          out: Path = typer.Option(..., "-o", "--out", help="output trace (.json[.gz]); a directory for several --to"),
          specs: Optional[Path] = SpecsOpt,
          origin: Optional[str] = typer.Option(None, "--from", help="origin GPU when deviceProperties lack it"),
          interconnect: Optional[str] = InterconnectOpt, gpus_per_node: Optional[int] = GpusPerNodeOpt,
          nodes: Optional[int] = NodesOpt,
          jobs: int = typer.Option(1, "--jobs", "-j", help="TRACE a directory: traces scaled in parallel")) -> None:
    """Write the trace as it would run on another GPU (TRACE a directory: every trace in it, one summary)."""
    from habitat_trace.commands import scale as cmd
    from habitat_trace.commands.ranks import deployment

    whatif = deployment(interconnect, gpus_per_node, nodes)
    if trace.is_dir():
        from habitat_trace.commands import batch

        batch.run(trace, to=to, out=out, specs=specs, origin=origin, jobs=jobs, whatif=whatif)
        return
    cmd.run(trace, to=to, out=out, specs=specs, origin=origin, whatif=whatif)


@app.command()
def check(trace: Path = typer.Argument(..., help="Chrome-trace JSON to check against Perfetto's import rules")) -> None:
    """Check a trace against the rules Perfetto's JSON importer applies; exit 1 on violations."""
    from habitat_trace.commands import check as cmd

    cmd.run(trace)


@app.command()
def compare(trace: Path = typer.Argument(..., help="torch.profiler trace (.json or .json.gz)"),
            to: str = typer.Option(..., "--to", help="comma-separated target GPUs, e.g. H100,A100,L4"),
            specs: Optional[Path] = SpecsOpt,
            price: List[str] = typer.Option([], "--price", help="override a price: GPU=USD per hour (repeatable)"),
            fmt: str = typer.Option("table", "--format", help="table, json or csv"),
            plot: Optional[Path] = typer.Option(None, "--plot", help="write a PNG: iteration time and cost per GPU"),
            origin: Optional[str] = typer.Option(None, "--from", help="origin GPU when deviceProperties lack it"),
            interconnect: Optional[str] = InterconnectOpt, gpus_per_node: Optional[int] = GpusPerNodeOpt,
            nodes: Optional[int] = NodesOpt) -> None:
    """One trace against many GPUs: iteration time, speed-up, cost, memory fit (TRACE a directory of per-rank
    traces: the slowest rank's step after a joint replay)."""
    from habitat_trace.commands import compare as cmd
    from habitat_trace.commands.ranks import deployment, only_for_ranks

    whatif = deployment(interconnect, gpus_per_node, nodes)
    only_for_ranks(trace, whatif)
    cmd.run(trace, to=to, specs=specs, prices=price, fmt=fmt, plot=plot, origin=origin, whatif=whatif)


@app.command()
def explain(trace: Path = typer.Argument(..., help="torch.profiler trace (.json or .json.gz)"),
            to: str = typer.Option(..., "--to", help="target GPU"),
            specs: Optional[Path] = SpecsOpt,
            top: int = typer.Option(15, "--top", help="how many ops and kernels"),
            fmt: str = FormatOpt,
            origin: Optional[str] = typer.Option(None, "--from", help="origin GPU when deviceProperties lack it"),
            interconnect: Optional[str] = InterconnectOpt, gpus_per_node: Optional[int] = GpusPerNodeOpt,
            nodes: Optional[int] = NodesOpt) -> None:
    """The ops and kernels whose time changes most on the target, and why (TRACE a directory of per-rank traces:
    per rank, the collectives' transfer time against waiting for the other ranks)."""
    from habitat_trace.commands import explain as cmd
    from habitat_trace.commands.ranks import deployment, only_for_ranks

    whatif = deployment(interconnect, gpus_per_node, nodes)
    only_for_ranks(trace, whatif)
    cmd.run(trace, to=to, specs=specs, top=top, fmt=fmt, origin=origin, whatif=whatif)


@app.command()
def validate(predicted: Path = typer.Argument(..., help="trace written by `habitat-trace scale`"),
             measured: Path = typer.Argument(..., help="trace measured on the target GPU"),
             fmt: str = FormatOpt, top: int = typer.Option(10, "--top", help="worst offenders to list")) -> None:
    """Compare a predicted trace with a measured one: step, op and kernel errors."""
    from habitat_trace.commands import validate as cmd

    cmd.run(predicted, measured, fmt=fmt, top=top)


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point; ``argv`` (default: sys.argv[1:]) lets tests check the error -> exit code mapping in-process."""
    from habitat_trace.errors import HabitatTraceError

    try:
        app(args=argv, standalone_mode=False)
    except HabitatTraceError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as exc:
        # usage errors come from click (typer vendors its own copy): they know how to show themselves
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            raise
        typer.echo(f"error: internal error ({type(exc).__name__}: {exc}); rerun with -vv for the traceback "
                   "and report it with the trace", err=True)
        sys.exit(INTERNAL_ERROR_EXIT)


if __name__ == "__main__":
    main()

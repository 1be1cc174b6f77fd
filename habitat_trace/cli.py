"""Command-line interface. Heavy modules are imported inside each command so ``--help`` stays fast.

Every user error is a HabitatTraceError: printed as one ``error:`` line on stderr, exit code from
the error class (README, "Exit codes"); no traceback, no partial output file. Ctrl-C exits 130 and
SIGTERM 143 (128 + the signal), after the writers have removed their temporary files.
"""
from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer

# Plain click help (rich_markup_mode=None): rich markup ate "[gpus."NAME"]" and printed <bool>/<list[str]> types.
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Predict a PyTorch training step on another GPU from a torch.profiler trace.")

INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE: a bug of ours, not the user's input
INTERRUPT_EXIT = 130  # 128 + SIGINT, what shells report for Ctrl-C
TERMINATED_EXIT = 128 + signal.SIGTERM  # 143: timeout, job schedulers, `docker stop`
FormatOpt = typer.Option("table", "--format", metavar="table|json|csv", help="table, json or csv")
SpecsOpt = typer.Option(None, "--specs", metavar="TOML",
                        help="extra GPU catalog (TOML, [gpus.\"NAME\"] tables; may use base=)")
TraceArg = typer.Argument(..., metavar="TRACE", help="torch.profiler trace (.json or .json.gz), or a directory of "
                                                     "one trace per rank")
FromOpt = typer.Option(None, "--from", metavar="GPU", help="origin GPU when deviceProperties lack it")
ToOpt = typer.Option(..., "--to", metavar="GPU[,GPU]|all",
                     help="target GPUs: comma-separated or repeated (H100,A100,L4), or all (the whole catalog)")
TopOpt = typer.Option(15, "--top", min=1, metavar="N", help="how many ops and kernels")
# what-ifs for the target's collectives (scale/collective.py); default: the target's usual node from the catalog
InterconnectOpt = typer.Option(None, "--interconnect", metavar="nvlink|pcie",
                               help="what-if: nvlink or pcie between the GPUs of a node")
GpusPerNodeOpt = typer.Option(None, "--gpus-per-node", metavar="N",
                               help="what-if: GPUs per node (default: the catalog's node)")
NodesOpt = typer.Option(None, "--nodes", metavar="N", help="what-if: nodes a collective's group spans")
# where the ranks of a run (a directory) are predicted: N local processes, or a Dask cluster (pipeline/fanout.py)
JobsOpt = typer.Option(1, "--jobs", "-j", metavar="N", help="processes: traces, ranks and targets in parallel")
ScaleJobsOpt = typer.Option(None, "--jobs", "-j", metavar="N",
                            help="processes: traces, ranks and targets in parallel (default: 2 for a trace to 32 GPUs "
                                 "or more where two CPUs are free, else 1)")
DaskOpt = typer.Option(None, "--dask", metavar="ADDRESS",
                       help="run the ranks on the Dask cluster at ADDRESS (pip install 'habitat-trace[dask]')")
# a one-GPU trace as one of N data-parallel ranks (pipeline.DataParallel, docs/distributed.md "Scale-out from one GPU")
WorldSizeOpt = typer.Option(1, "--world-size", metavar="N",
                            help="scale-out: the one-GPU trace as one of N data-parallel ranks (1: as recorded)")
StrategyOpt = typer.Option("ddp", "--strategy", metavar="ddp|fsdp|fsdp1", help="scale-out: DDP buckets, FSDP2 (fully_shard) or FSDP1 units")
DDP_BUCKET_MB = 25.0  # scale.dataparallel.DEFAULT_BUCKET_MB, written here so that --help imports no numpy (tested)
BucketMbOpt = typer.Option(DDP_BUCKET_MB, "--bucket-mb", metavar="MB", help="scale-out: DDP's bucket_cap_mb in MiB")
BroadcastBuffersOpt = typer.Option(True, "--broadcast-buffers/--no-broadcast-buffers",
                                   help="scale-out: DDP's broadcast_buffers (the module's buffers from rank 0 at each "
                                        "forward, DDP's default)")
FsdpWrapOpt = typer.Option("blocks", "--fsdp-wrap", metavar="blocks|none",
                           help="scale-out, FSDP: a unit per repeated block (blocks) or the whole model one (none)")
MeasuredStepOpt = typer.Option(None, "--measured-step", metavar="MS|IT/s",
                               help="your real step without the profiler (training log: 3.1ms or 320it/s): the origin "
                                    "row is then exactly it, and every target's host clock is calibrated to it")
# the target's host (pipeline.Host): the origin's, without the profiler's overhead, at a what-if speed
CpuSpeedOpt = typer.Option(1.0, "--cpu-speed", metavar="RATIO", min=0.01,
                           help="what-if: the target host's CPU speed relative to the origin's (1.5 = 50% faster)")
KeepOverheadOpt = typer.Option(False, "--keep-profiler-overhead",
                               help="keep the profiler's host overhead in the replayed CPU timeline (default: removed)")


def _version(value: bool) -> None:
    if value:
        from habitat_trace import __version__

        typer.echo(f"habitat-trace {__version__}")
        raise typer.Exit()


def _options(values: dict[str, Any]) -> Any:
    """The options of a command's parameters (``locals()`` at its start), each named as its keyword of
    pipeline.Options.of, the one map the API and the hook use too: the same meaning for a file and a directory, in
    every command."""
    from habitat_trace.pipeline.options import KEYWORDS, Options

    return Options.of(**{k: values[k] for k in KEYWORDS if k in values})


def _render(report: Any, fmt: str, stderr: bool = False) -> None:
    from habitat_trace.commands.common import quiet
    from habitat_trace.commands.render import render

    render(report, fmt, out=sys.stderr if stderr else sys.stdout, warn=not quiet())


def _show(make: Callable[[], Any], fmt: str, result: bool = False, stderr: bool = False) -> None:
    """Print the report ``make`` returns; when it raises ReportedError (a directory with traces that could not be
    read or scaled: commands/common.py), print its report, then the error. ``result``: a report of what was done
    (scale's), not printed under -q."""
    from habitat_trace.commands.common import ReportedError, quiet

    shown = not (result and quiet())
    try:
        report = make()
    except ReportedError as exc:
        if shown:
            _render(exc.report, fmt, stderr=stderr)
        raise
    if shown:
        _render(report, fmt, stderr=stderr)


@app.callback()
def _root(verbose: int = typer.Option(0, "--verbose", "-v", count=True, metavar="",
                                      help="log what each step does and how long it takes (-vv: debug, tracebacks)"),
          quiet: bool = typer.Option(False, "--quiet", "-q", metavar="",
                                     help="errors only: no progress, warnings or result line (tables and JSON a "
                                          "command exists to print still go to stdout)"),
          version: bool = typer.Option(False, "--version", metavar="", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)  # every run sets its own level (basicConfig only configures once)


@app.command()
def inspect(trace: Path = TraceArg, fmt: str = FormatOpt,
            top: int = typer.Option(10, "--top", min=1, metavar="N", help="how many top kernels"),
            specs: Optional[Path] = SpecsOpt, origin: Optional[str] = FromOpt) -> None:
    """Summarize a trace (or each trace of a directory): origin GPU, steps, CPU/GPU time per step, kernels by
    class, top kernels, and the origin step compare reports (a directory's ranks replayed jointly)."""
    from habitat_trace.commands import inspect as cmd
    from habitat_trace.commands.render import check_format

    check_format(fmt)
    options = _options(locals())
    _show(lambda: cmd.report(trace, options, top=top), fmt)


@app.command()
def gpus(specs: Optional[Path] = SpecsOpt, fmt: str = FormatOpt) -> None:
    """List the GPU catalog (with --specs entries)."""
    from habitat_trace.commands import gpus as cmd
    from habitat_trace.commands.render import check_format

    _render(cmd.report(specs), check_format(fmt))


@app.command()
def scale(trace: Path = TraceArg, to: List[str] = ToOpt,
          out: str = typer.Option(..., "-o", "--out", metavar="PATH",
                                  help="output trace (.json[.gz]); a directory (existing) for several traces or --to; "
                                       "- for stdout (JSON)"),
          specs: Optional[Path] = SpecsOpt, origin: Optional[str] = FromOpt,
          interconnect: Optional[str] = InterconnectOpt, gpus_per_node: Optional[int] = GpusPerNodeOpt,
          nodes: Optional[int] = NodesOpt, cpu_speed: float = CpuSpeedOpt,
          keep_profiler_overhead: bool = KeepOverheadOpt,
          jobs: Optional[int] = ScaleJobsOpt, fmt: str = FormatOpt, world_size: int = WorldSizeOpt,
          strategy: str = StrategyOpt, bucket_mb: float = BucketMbOpt, fsdp_wrap: str = FsdpWrapOpt,
          broadcast_buffers: bool = BroadcastBuffersOpt, measured_step: Optional[str] = MeasuredStepOpt,
          dask: Optional[str] = DaskOpt) -> None:
    """Write the trace as it would run on another GPU (TRACE a directory: every trace in it; the ranks of one
    distributed run are replayed jointly); one report of what was written."""
    from habitat_trace.commands import scale as cmd
    from habitat_trace.commands.render import check_format

    check_format(fmt)
    options = _options(locals())
    # the report of what was written (not under -q), on stderr when the trace went to stdout
    _show(lambda: cmd.report(trace, to=to, out=out, options=options, jobs=jobs, dask=dask), fmt, result=True,
          stderr=out == "-")


@app.command()
def check(trace: Path = typer.Argument(..., metavar="TRACE", help="Chrome-trace JSON to check against Perfetto's "
                                                                   "import rules"),
          source: Optional[Path] = typer.Option(None, "--input", metavar="TRACE",
                                                help="the trace `scale` read (default: the violations its output "
                                                     "records, else the file it names beside it); its own "
                                                     "violations only warn"),
          fmt: str = FormatOpt) -> None:
    """Check a trace against the rules Perfetto's JSON importer applies; exit 1 on violations habitat-trace made."""
    from habitat_trace.commands import check as cmd
    from habitat_trace.commands.common import quiet
    from habitat_trace.commands.render import check_format

    check_format(fmt)
    report, errors = cmd.report(trace, source=source)
    if not (quiet() and fmt == "table"):  # -q: the exit status is the answer (as grep -q); json and csv when asked
        _render(report, fmt)
    if errors:
        raise typer.Exit(1)


@app.command()
def compare(trace: Path = TraceArg, to: List[str] = ToOpt, specs: Optional[Path] = SpecsOpt,
            price: List[str] = typer.Option([], "--price", metavar="GPU=USD[,GPU=USD]",
                                            help="override a price: GPU=USD per hour (comma-separated or repeated)"),
            fmt: str = FormatOpt,
            plot: Optional[Path] = typer.Option(None, "--plot", metavar="PNG",
                                                help="write a PNG: iteration time and cost per GPU"),
            origin: Optional[str] = FromOpt,
            interconnect: Optional[str] = InterconnectOpt, gpus_per_node: Optional[int] = GpusPerNodeOpt,
            nodes: Optional[int] = NodesOpt, cpu_speed: float = CpuSpeedOpt,
            keep_profiler_overhead: bool = KeepOverheadOpt,
            world_size: int = WorldSizeOpt, strategy: str = StrategyOpt, bucket_mb: float = BucketMbOpt,
            fsdp_wrap: str = FsdpWrapOpt, broadcast_buffers: bool = BroadcastBuffersOpt,
            measured_step: Optional[str] = MeasuredStepOpt, jobs: int = JobsOpt,
            dask: Optional[str] = DaskOpt) -> None:
    """One run against many GPUs: iteration time, speed-up, cost, memory fit (TRACE a directory of per-rank
    traces: the slowest rank's step after a joint replay; --world-size N: a one-GPU trace as one of N ranks)."""
    from habitat_trace.commands import compare as cmd
    from habitat_trace.commands.render import check_format

    check_format(fmt)
    options = _options(locals())
    _show(lambda: cmd.report(trace, to=to, options=options, prices=price, plot=plot, jobs=jobs, dask=dask), fmt)


@app.command()
def explain(trace: Path = TraceArg, to: List[str] = ToOpt, specs: Optional[Path] = SpecsOpt, top: int = TopOpt,
            fmt: str = FormatOpt, origin: Optional[str] = FromOpt,
            interconnect: Optional[str] = InterconnectOpt, gpus_per_node: Optional[int] = GpusPerNodeOpt,
            nodes: Optional[int] = NodesOpt, cpu_speed: float = CpuSpeedOpt,
            keep_profiler_overhead: bool = KeepOverheadOpt,
            world_size: int = WorldSizeOpt, strategy: str = StrategyOpt, bucket_mb: float = BucketMbOpt,
            fsdp_wrap: str = FsdpWrapOpt, broadcast_buffers: bool = BroadcastBuffersOpt,
            measured_step: Optional[str] = MeasuredStepOpt) -> None:
    """The ops and kernels whose time changes most on the target, and why; per rank, the step before and after
    (TRACE a directory of per-rank traces: with the collectives' transfer time and the wait for the other ranks)."""
    from habitat_trace.commands import explain as cmd
    from habitat_trace.commands.render import check_format

    check_format(fmt)
    options = _options(locals())
    _show(lambda: cmd.report(trace, to=to, options=options, top=top), fmt)


@app.command()
def validate(predicted: Path = typer.Argument(..., metavar="PREDICTED",
                                             help="trace written by `habitat-trace scale` (or a directory of them)"),
             measured: Path = typer.Argument(..., metavar="MEASURED",
                                            help="trace measured on the target GPU (or a directory, one per rank)"),
             fmt: str = FormatOpt, specs: Optional[Path] = SpecsOpt,
             top: int = typer.Option(10, "--top", min=1, metavar="N", help="worst offenders to list")) -> None:
    """Compare a predicted trace with a measured one: step, op and kernel errors."""
    from habitat_trace.commands import validate as cmd
    from habitat_trace.commands.render import check_format

    check_format(fmt)
    options = _options(locals())
    _show(lambda: cmd.report(predicted, measured, options=options, top=top), fmt)


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point; ``argv`` (default: sys.argv[1:]) lets tests check the error -> exit code mapping in-process."""
    from habitat_trace.errors import HabitatTraceError, Interrupted

    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        # standalone_mode=False: click returns the exit code of a command's typer.Exit (check's 1) instead of
        # exiting; dropping it made `check` exit 0 with errors
        code = app(args=argv, standalone_mode=False)
    except HabitatTraceError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Interrupted as exc:  # scale: a signal stopped the work; say what was written
        _interrupted(exc)
    except (typer.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort; a KeyboardInterrupt outside it
        typer.echo("aborted", err=True)
        sys.exit(INTERRUPT_EXIT)
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
    finally:
        signal.signal(signal.SIGTERM, previous)
    if isinstance(code, int) and code:
        if code == INTERRUPT_EXIT:  # typer turns Ctrl-C into Exit(130)
            typer.echo("aborted", err=True)
        sys.exit(code)


def _interrupted(exc: Any) -> None:
    from habitat_trace.commands.common import quiet

    done = [r for r in exc.rows if not r.get("error")]
    if done and not quiet():
        from habitat_trace.commands.scale import outputs_report

        _render(outputs_report(exc.rows), "table", stderr=True)
    typer.echo(f"{'terminated' if exc.exit_code == TERMINATED_EXIT else 'aborted'}: wrote {len(done)} traces before "
               "the signal; nothing after it", err=True)
    sys.exit(exc.exit_code)


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM: unwind like Ctrl-C (the writers' ``except BaseException`` remove their temp files), exit 143."""
    typer.echo("terminated", err=True)
    raise SystemExit(TERMINATED_EXIT)


if __name__ == "__main__":
    main()

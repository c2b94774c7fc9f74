"""`distmon [LOGDIR ...]`: the dashboard, or with `--once` a one-shot report.

The edge where outside input meets the terminal: every user error is one line and exit 2, a
crash is one line, a log file and a non-zero exit, a closed pipe ends quietly, and a strict or
non-UTF-8 stdout never raises.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from distcore import __version__
from distcore.cli_parser import OneLineParser
from distcore.errors import DistmonError
from distcore.textsafe import terminal_text
from distmon.options import (
    DEFAULT_MAX_SERIES,
    MAX_POINTS,
    MAX_REFRESH,
    MAX_SERIES,
    MAX_SIMULATED_GPUS,
    MIN_REFRESH,
    Options,
)

BROKEN_PIPE_EXIT = 128 + 13  # what a shell reports for a writer killed by SIGPIPE
INTERRUPTED_EXIT = 130


def _bounded(kind: type[float] | type[int], low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a finite number of `kind` in [low, high]."""

    def shown(x: float) -> str:
        return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

    what = f"{'a count' if kind is int else 'seconds'} from {shown(low)} to {shown(high)}"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        # NaN compares false both ways: refused with the infinities and the out-of-range.
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="distmon",
        description="Watch TensorBoard logdirs and GPUs live in the terminal. When standard output "
        "(or standard error, where the dashboard draws) is not a terminal, distmon prints the "
        "--once report instead.",
    )
    parser.add_argument(
        "logdirs",
        nargs="*",
        metavar="LOGDIR",
        help="log directories, [user@]host:PATH over ssh, or s3://, gs://... URLs"
        " (default: ./runs, else .)",
    )
    parser.add_argument(
        "--ssh-config", type=Path, metavar="FILE", help="ssh config file for host:PATH (ssh -F)"
    )
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an fsspec option for URLs (e.g. endpoint_url=http://127.0.0.1:9000)",
    )
    parser.add_argument("--poll", action="store_true", help="poll files instead of inotify")
    parser.add_argument(
        "--refresh",
        type=_bounded(float, MIN_REFRESH, MAX_REFRESH),
        default=1.0,
        metavar="SECONDS",
        help=f"refresh interval, {MIN_REFRESH}-{MAX_REFRESH:g} (default 1)",
    )
    parser.add_argument(
        "--no-gpu", action="store_true", help="no GPUs: no NVML here, no nvidia-smi on ssh hosts"
    )
    parser.add_argument(
        "--simulate-gpus",
        type=_bounded(int, 0, MAX_SIMULATED_GPUS),
        default=0,
        metavar="N",
        help="show N simulated GPUs (demo)",
    )
    parser.add_argument(
        "--once", action="store_true", help="read everything once, print a report, exit"
    )
    parser.add_argument("--json", action="store_true", help="with --once: print JSON")
    parser.add_argument(
        "--check",
        action="store_true",
        help="with --once: exit 1 when any alert is critical (a diverged or failed job, NaN "
        "loss, a highly input-bound job), else 0; for cron, Slurm epilogues and CI",
    )
    parser.add_argument(
        "--max-points",
        type=_bounded(int, 2, MAX_POINTS),
        default=2000,
        metavar="N",
        help="points kept per series (default 2000)",
    )
    _add_serve_flags(parser)
    _add_table_arguments(parser)
    parser.add_argument("--version", action="version", version=f"distmon {__version__}")
    return parser


def _add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """`--serve` and its outputs (issue 22)."""
    serve = parser.add_argument_group("headless service (--serve)")
    serve.add_argument(
        "--serve",
        action="store_true",
        help="watch the sources without a terminal until SIGTERM/SIGINT (cron, systemd, a Slurm "
        "job); needs --metrics and/or --notify",
    )
    serve.add_argument(
        "--metrics",
        metavar="[HOST:]PORT",
        help="with --serve: Prometheus metrics at http://HOST:PORT/metrics (HOST defaults to "
        "127.0.0.1; 0.0.0.0 for every interface; port 0 picks a free one, printed at start)",
    )
    serve.add_argument(
        "--notify",
        metavar="URL",
        help="with --serve: POST each new alert as JSON with a Slack-compatible 'text' field to "
        "this webhook (retried with backoff; the URL is never printed whole)",
    )
    serve.add_argument(
        "--notify-level",
        choices=("info", "warning", "critical"),
        help="with --notify: the least severe alert posted (default critical)",
    )
    serve.add_argument(
        "--max-series",
        type=_bounded(int, 1, MAX_SERIES),
        metavar="N",
        help=f"with --metrics: series exported at most; the rest are counted in "
        f"distmon_series_dropped (default {DEFAULT_MAX_SERIES:,})",
    )


def _serve_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The --serve fields of Options, or a usage error naming what is missing or misplaced."""
    if not args.serve:
        for flag in ("metrics", "notify", "notify_level", "max_series"):
            if getattr(args, flag) is not None:
                parser.error(f"--{flag.replace('_', '-')} needs --serve")
        return {}
    # Only with --serve: the webhook client's urllib, http.client and email cost a dashboard's
    # start 0.1 s of CPU before Textual even loaded.
    from distcore.notify import check_url
    from distmon.serve import parse_listen

    for flag in ("once", "json", "check"):
        if getattr(args, flag):
            parser.error(f"--serve and --{flag} do not go together")
    if args.metrics is None and args.notify is None:
        parser.error("--serve needs an output: add --metrics [HOST:]PORT and/or --notify URL")
    if args.notify_level is not None and args.notify is None:
        parser.error("--notify-level needs --notify URL")
    if args.max_series is not None and args.metrics is None:
        parser.error("--max-series needs --metrics")
    try:
        metrics = parse_listen(args.metrics) if args.metrics is not None else None
        notify = check_url(args.notify) if args.notify is not None else None
    except DistmonError as err:
        parser.error(str(err))
    return {
        "serve": True,
        "metrics": metrics,
        "notify": notify,
        "notify_level": args.notify_level or "critical",
        "max_series": args.max_series or DEFAULT_MAX_SERIES,
    }


def _add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """The comparison table (issue 20): one row per job, its hparams and metrics as columns."""
    parser.add_argument(
        "--table",
        action="store_true",
        help="with --once: print the comparison table, one row per job: status, step, its "
        "hparams and each tag's last value, TAG.min and TAG.max",
    )
    parser.add_argument(
        "--csv", action="store_true", help="with --once: the same rows as CSV, a header first"
    )
    parser.add_argument(
        "--points",
        action="store_true",
        help="with --once: every kept point as CSV run,tag,step,wall_time,value "
        "(--max-points says how many a series keeps)",
    )
    parser.add_argument(
        "--sort",
        metavar="[-]COLUMN",
        help="sort the table (and the dashboard's jobs) by COLUMN: numbers as numbers, missing "
        "last; -COLUMN reverses",
    )
    parser.add_argument(
        "--filter",
        metavar="EXPR",
        default="",
        help="keep the jobs matching every NAME OP VALUE of a comma-separated list, OP one of "
        "< <= > >= = != (e.g. 'lr<0.01,optimizer=adam'); a job without NAME does not match; "
        "the dashboard starts with it too",
    )


def _check_table_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    chosen = [f"--{n}" for n in ("json", "table", "csv", "points") if getattr(args, n)]
    if len(chosen) > 1:
        parser.error(f"{' and '.join(chosen)}: choose one")
    for flag in ("table", "csv", "points"):
        if getattr(args, flag) and not args.once:
            parser.error(f"--{flag} needs --once")
    from distcore.table import parse_filter, parse_sort

    try:
        parse_filter(args.filter)
        if args.sort is not None:
            parse_sort(args.sort)
    except DistmonError as err:
        parser.error(str(err))


def _default_logdirs() -> tuple[Path, ...]:
    runs = Path("runs")
    return (runs,) if runs.is_dir() else (Path("."),)


def _joined_sort(argv: Sequence[str]) -> list[str]:
    """`--sort -loss` as `--sort=-loss`: argparse would take `-loss` for an option."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] == "--sort" and arg.startswith("-") and arg not in ("-", "--"):
            out[-1] = f"--sort={arg}"
        else:
            out.append(arg)
    return out


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = build_parser()
    args = parser.parse_args(_joined_sort(sys.argv[1:] if argv is None else argv))
    if args.json and not args.once:
        parser.error("--json needs --once")
    if args.check and not args.once:
        parser.error("--check needs --once")
    serve = _serve_options(parser, args)
    _check_table_arguments(parser, args)
    from distcore.remote.spec import LocalSpec, parse_sources, parse_storage_options

    try:
        specs = parse_sources(args.logdirs)
        storage_options = parse_storage_options(args.storage_option)
    except DistmonError as err:
        parser.error(str(err))
    if args.ssh_config is not None and not args.ssh_config.is_file():
        parser.error(f"--ssh-config: no such file: {args.ssh_config}")
    remotes = tuple(s for s in specs if not isinstance(s, LocalSpec))
    logdirs = tuple(s.path for s in specs if isinstance(s, LocalSpec))
    if not specs:
        logdirs = _default_logdirs()
    return Options(
        logdirs=logdirs,
        poll=args.poll,
        refresh=args.refresh,
        no_gpu=args.no_gpu,
        simulate_gpus=args.simulate_gpus,
        once=args.once,
        json=args.json,
        check=args.check,
        max_points=args.max_points,
        remotes=remotes,
        ssh_config=args.ssh_config,
        storage_options=storage_options,
        **serve,
        table=args.table,
        csv=args.csv,
        points=args.points,
        sort=args.sort,
        filter=args.filter,
    )


def check_logdir(path: Path) -> None:
    """A LOGDIR named on the command line must be a directory we can list."""
    try:
        with os.scandir(path):
            return
    except FileNotFoundError:
        problem = "no such log directory"
    except NotADirectoryError:
        problem = "not a directory"
    except OSError as err:
        problem = f"cannot read log directory ({err.strerror or type(err).__name__})"
    raise DistmonError(f"{problem}: {terminal_text(path, 300)}")


def _tolerant_streams() -> None:
    """A non-UTF-8 locale or PYTHONIOENCODING=ascii:strict: write what cannot be encoded as
    backslash escapes instead of raising UnicodeEncodeError halfway through a report."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):  # closed
        return False


def _run(argv: Sequence[str] | None) -> int:
    options = parse_options(argv)
    try:
        if not options.remotes:  # with remote sources: one line among the others (--once)
            for logdir in options.logdirs:
                check_logdir(logdir)
        if options.serve:  # headless: no terminal needed
            from distmon.serve import run_serve

            return run_serve(options)
        # Textual draws on stderr: both must be terminals, or escape codes go into a file.
        if not options.once and not (_is_terminal(sys.stdout) and _is_terminal(sys.__stderr__)):
            options = dataclasses.replace(options, once=True)
        from distmon.logs import configure  # tracebacks to DISTMON_LOG, never over the screen

        undo_logging = configure("once" if options.once else "dashboard", sys.stderr)
        try:
            if options.once:
                from distmon.once import run_once

                # With no argv, main() is the program itself (the console script, `python -m
                # distmon`), which exits when it returns; a caller passing argv may go on.
                return run_once(options, last=argv is None)
            from distmon.app import run_app

            return run_app(options)
        finally:
            undo_logging()
    except DistmonError as err:  # messages may quote outside strings (paths, hosts, keys)
        for line in str(err).splitlines() or [""]:
            print(f"distmon: {terminal_text(line, 500)}", file=sys.stderr)
        return err.exit_code


def _quiet_after_broken_pipe() -> None:
    """The reader went away: send what is still buffered nowhere, so that the interpreter's own
    flush at exit does not print 'Exception ignored ... BrokenPipeError'."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


def _one_blas_thread() -> None:
    """numpy's OpenBLAS starts a thread per core as it loads: 0.04 s of CPU (0.15 -> 0.11)
    and 0.07 s on the dashboard's way to its first row, measured here. distmon does no linear
    algebra, so one is enough; a value the user set is kept (and seen by child processes)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    _tolerant_streams()
    _one_blas_thread()
    try:
        try:
            code = _run(argv)
        except SystemExit as done:  # argparse: --help, --version and usage errors
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except KeyboardInterrupt:
            code = INTERRUPTED_EXIT
        except BrokenPipeError:
            raise
        except Exception as err:  # a bug: never a bare traceback, never exit 0
            from distmon.crash import report_crash

            code = report_crash(err)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _quiet_after_broken_pipe()
        return BROKEN_PIPE_EXIT


if __name__ == "__main__":
    sys.exit(main())

"""What `distmon`'s command line accepts: the argparse parser, its flag groups and bounds.

Building the parser imports no reader and no --serve machinery; distmon.arguments checks what
it parsed into `Options`, and distmon.cli runs them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from distcore import __version__
from distcore.bounded import MAX_PRICE
from distcore.cli_parser import OneLineParser
from distmon.options import (
    DEFAULT_HOLD_SECONDS,
    DEFAULT_MAX_SERIES,
    MAX_HOLD_SECONDS,
    MAX_POINTS,
    MAX_REFRESH,
    MAX_SERIES,
    MAX_SIMULATED_GPUS,
    MIN_REFRESH,
)


def _bounded(kind: type[float] | type[int], low: float, high: float,
             unit: str | None = None) -> Callable[[str], float]:
    """An argparse type: a finite number of `kind` in [low, high] (`unit`: what it counts,
    default a count or seconds)."""

    def shown(x: float) -> str:
        return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

    unit = unit or ("a count" if kind is int else "seconds")
    what = f"{unit} from {shown(low)} to {shown(high)}"

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
    _add_source_flags(parser)
    _add_once_flags(parser)
    parser.add_argument(
        "--max-points",
        type=_bounded(int, 2, MAX_POINTS),
        default=2000,
        metavar="N",
        help="points kept per series (default 2000)",
    )
    parser.add_argument(
        "--screenshot-dir", type=Path, metavar="DIR",
        help="where the dashboard's screenshot (command palette) writes its SVG (default: the "
        "current directory)",
    )
    _add_price_flags(parser)
    _add_serve_flags(parser)
    _add_table_arguments(parser)
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and the "
                        "event decoder in use, and exit")  # fmt: skip
    return parser


def _add_source_flags(parser: argparse.ArgumentParser) -> None:
    """What to watch and how often: logdirs and their transports, GPUs."""
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


def _add_once_flags(parser: argparse.ArgumentParser) -> None:
    """The one-shot report and its check."""
    parser.add_argument(
        "--once", action="store_true", help="read everything once, print a report, exit"
    )
    parser.add_argument("--json", action="store_true", help="with --once: print JSON")
    parser.add_argument(
        "--check",
        action="store_true",
        help="with --once: exit 1 when an alert is critical (a diverged or failed job, NaN "
        "loss, a highly input-bound job) about a job that goes on, or that ended within "
        "--ended-within seconds, or about no job (a host's GPUs); else 0. For cron, Slurm "
        "epilogues and CI",
    )
    parser.add_argument(
        "--ended-within",
        type=_bounded(float, 0, 10 * 365 * 86400),
        default=None,
        metavar="SECONDS",
        help="with --check: how long after a job ended (run.json or Slurm says so, or its files "
        "went idle) its critical alerts still fail the check (default 3600; a cron job's "
        "interval hears of each once)",
    )


class _Version(argparse.Action):
    """argparse's version action, naming the event decoder too (found only when asked: the
    parser is built on every start)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:  # fmt: skip
        import sys

        from distmon.decoder_note import decoder_line

        text = f"distmon {__version__}\n{decoder_line(always=True)}\n"
        parser._print_message(text, sys.stdout)  # (a closed stdout is not an error)
        parser.exit()


def _add_price_flags(parser: argparse.ArgumentParser) -> None:
    """What a job's GPU-hours and energy cost: its money in the panel, --once, JSON, metrics."""
    for flag, per in (("--price-gpu-hour", "GPU-hour"), ("--price-kwh", "kWh")):
        parser.add_argument(
            flag, type=_bounded(float, 0, MAX_PRICE, f"USD per {per}"), default=None,
            metavar="USD",
            help=f"USD per {per}: what each job cost (default: the job's own [cost] price in "
            "run.json, else no money shown)",
        )


def _add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """`--serve` and its outputs: metrics and webhooks, no terminal."""
    serve = parser.add_argument_group("headless service (--serve)")
    serve.add_argument(
        "--serve",
        action="store_true",
        help="watch the sources without a terminal until SIGTERM/SIGINT (cron, systemd, a Slurm "
        "job); needs --metrics and/or a webhook (--notify-file, DISTMON_NOTIFY_URL, --notify)",
    )
    serve.add_argument(
        "--metrics",
        metavar="[HOST:]PORT",
        help="with --serve: Prometheus metrics at http://HOST:PORT/metrics (HOST defaults to "
        "127.0.0.1; 0.0.0.0 for every interface; port 0 picks a free one, printed at start)",
    )
    serve.add_argument(
        "--notify-file",
        metavar="PATH",
        help="with --serve: POST each new alert as JSON with a Slack-compatible 'text' field to "
        "the webhook URL on the first line of PATH (a file only its owner can read; or set "
        "DISTMON_NOTIFY_URL); retried with backoff, the URL never printed whole",
    )
    serve.add_argument(
        "--notify",
        metavar="URL",
        help="as --notify-file, the URL on the command line (where `ps` shows it to every user)",
    )
    serve.add_argument(
        "--notify-level",
        choices=("info", "warning", "critical"),
        help="with --notify: the least severe alert posted (default critical)",
    )
    serve.add_argument(
        "--notify-hold",
        type=_bounded(float, 0, MAX_HOLD_SECONDS),
        metavar="SECONDS",
        help="with --notify: an alert that clears and returns within this is posted once, with "
        f"its count (0 posts every return; default {DEFAULT_HOLD_SECONDS:g})",
    )
    serve.add_argument(
        "--max-series",
        type=_bounded(int, 1, MAX_SERIES),
        metavar="N",
        help=f"with --metrics: series exported at most; the rest are counted in "
        f"distmon_series_dropped (default {DEFAULT_MAX_SERIES:,})",
    )


def _add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """The comparison table of a sweep: one row per job, its hparams and metrics as columns."""
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
        "--plot",
        metavar="REGEX",
        help="with --once: draw the chart of every scalar tag matching REGEX (case-insensitive) "
        "as braille text, the jobs overlaid in colour on a terminal, one chart per curve without",
    )
    parser.add_argument(
        "--width",
        type=_bounded(int, 40, 1000),
        metavar="COLUMNS",
        help="with --plot: the charts' width (default: the terminal's, else 100)",
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

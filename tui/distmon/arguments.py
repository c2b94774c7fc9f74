"""`distmon`'s command line checked into `Options`: one usage error per line, exit 2.

What argparse cannot say alone is checked here: flags that need another (`--json` needs
`--once`), flags that do not go together, the sources, the storage options, the table's sort
and filter. Only `--serve` imports its URL and address parsers, and only then.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distcore.errors import DistmonError
from distmon.flags import build_parser
from distmon.options import (
    DEFAULT_ENDED_WITHIN,
    DEFAULT_HOLD_SECONDS,
    DEFAULT_MAX_SERIES,
    Options,
)

if TYPE_CHECKING:
    from distcore.remote.spec import SshSpec, UrlSpec

SERVE_FLAGS = ("metrics", "notify", "notify_file", "notify_level", "notify_hold", "max_series")


def _serve_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The --serve fields of Options, or a usage error naming what is missing or misplaced."""
    if not args.serve:
        for flag in SERVE_FLAGS:
            if getattr(args, flag) is not None:
                parser.error(f"--{flag.replace('_', '-')} needs --serve")
        return {}
    # Only with --serve: the webhook client's urllib, http.client and email would add to every
    # dashboard's start before Textual even loaded.
    from distcore.webhook.url import choose_url
    from distmon.serve import parse_listen

    for flag in ("once", "json", "check"):
        if getattr(args, flag):
            parser.error(f"--serve and --{flag} do not go together")
    try:
        webhook = choose_url(args.notify, args.notify_file)
        metrics = parse_listen(args.metrics) if args.metrics is not None else None
    except DistmonError as err:
        parser.error(str(err))
    if metrics is None and webhook is None:
        parser.error("--serve needs an output: add --metrics [HOST:]PORT and/or a webhook "
                     "(--notify-file PATH, DISTMON_NOTIFY_URL or --notify URL)")  # fmt: skip
    for flag in ("notify_level", "notify_hold"):
        if getattr(args, flag) is not None and webhook is None:
            parser.error(f"--{flag.replace('_', '-')} needs a webhook (--notify-file PATH, "
                         "DISTMON_NOTIFY_URL or --notify URL)")  # fmt: skip
    if args.max_series is not None and metrics is None:
        parser.error("--max-series needs --metrics")
    return {
        "serve": True,
        "metrics": metrics,
        "notify": webhook.url if webhook is not None else None,
        "notify_source": webhook.source if webhook is not None else "",
        "notify_level": args.notify_level or "critical",
        "notify_hold": DEFAULT_HOLD_SECONDS if args.notify_hold is None else args.notify_hold,
        "max_series": args.max_series or DEFAULT_MAX_SERIES,
    }


def _check_table_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    chosen = [f"--{n}" for n in ("json", "table", "csv", "points", "plot") if getattr(args, n)]
    if len(chosen) > 1:
        parser.error(f"{' and '.join(chosen)}: choose one")
    for flag in ("table", "csv", "points", "plot"):
        if getattr(args, flag) and not args.once:
            parser.error(f"--{flag} needs --once")
    if args.width is not None and not args.plot:
        parser.error("--width needs --plot")
    if args.plot is not None:
        try:
            re.compile(args.plot)
        except re.error as err:
            parser.error(f"--plot: not a regular expression: {err}")
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


def _check_once_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.json and not args.once:
        parser.error("--json needs --once")
    if args.check and not args.once:
        parser.error("--check needs --once")
    if args.ended_within is not None and not args.check:
        parser.error("--ended-within needs --check")


def _sources(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[tuple[Path, ...], tuple[SshSpec | UrlSpec, ...], dict[str, Any]]:
    """(local logdirs, remote sources, fsspec options) from LOGDIR..., --storage-option and
    --ssh-config; the default logdirs where none is given."""
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
    return logdirs if specs else _default_logdirs(), remotes, storage_options


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = build_parser()
    args = parser.parse_args(_joined_sort(sys.argv[1:] if argv is None else argv))
    _check_once_flags(parser, args)
    serve = _serve_options(parser, args)
    _check_table_arguments(parser, args)
    logdirs, remotes, storage_options = _sources(parser, args)
    if args.screenshot_dir is not None and not args.screenshot_dir.is_dir():
        parser.error(f"--screenshot-dir: no such directory: {args.screenshot_dir}")
    return Options(
        logdirs=logdirs,
        poll=args.poll,
        refresh=args.refresh,
        no_gpu=args.no_gpu,
        simulate_gpus=args.simulate_gpus,
        once=args.once,
        json=args.json,
        check=args.check,
        ended_within=DEFAULT_ENDED_WITHIN if args.ended_within is None else args.ended_within,
        max_points=args.max_points,
        plot=args.plot,
        width=args.width,
        screenshot_dir=args.screenshot_dir,
        remotes=remotes,
        ssh_config=args.ssh_config,
        storage_options=storage_options,
        **serve,
        table=args.table,
        csv=args.csv,
        points=args.points,
        sort=args.sort,
        filter=args.filter,
        price_gpu_hour=args.price_gpu_hour,
        price_kwh=args.price_kwh,
    )

"""`distmon [LOGDIR ...]`: the dashboard, or with `--once` a one-shot report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from distcore import __version__
from distcore.errors import DistmonError
from distmon.options import Options


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distmon",
        description="Watch TensorBoard logdirs and GPUs live in the terminal.",
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
        "--refresh", type=float, default=1.0, metavar="SECONDS", help="refresh interval (default 1)"
    )
    parser.add_argument("--no-gpu", action="store_true", help="do not query NVML")
    parser.add_argument(
        "--simulate-gpus", type=int, default=0, metavar="N", help="show N simulated GPUs (demo)"
    )
    parser.add_argument("--once", action="store_true", help="read everything once, print, exit")
    parser.add_argument("--json", action="store_true", help="with --once: print JSON")
    parser.add_argument(
        "--max-points",
        type=int,
        default=2000,
        metavar="N",
        help="points kept per series (default 2000)",
    )
    parser.add_argument("--version", action="version", version=f"distmon {__version__}")
    return parser


def _default_logdirs() -> tuple[Path, ...]:
    runs = Path("runs")
    return (runs,) if runs.is_dir() else (Path("."),)


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.json and not args.once:
        parser.error("--json needs --once")
    if args.refresh <= 0:
        parser.error("--refresh must be positive")
    if args.simulate_gpus < 0 or args.max_points < 2:
        parser.error("--simulate-gpus must be >= 0 and --max-points >= 2")
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
        max_points=args.max_points,
        remotes=remotes,
        ssh_config=args.ssh_config,
        storage_options=storage_options,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    try:
        missing = [str(p) for p in options.logdirs if not p.is_dir()]
        if missing and not options.remotes:  # with remote sources: one line among the others
            raise DistmonError(f"no such log directory: {missing[0]}")
        if options.once:
            from distmon.once import run_once

            return run_once(options)
        from distmon.app import run_app

        return run_app(options)
    except DistmonError as err:
        print(f"distmon: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

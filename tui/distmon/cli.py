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
        "logdirs", nargs="*", metavar="LOGDIR", help="log directories (default: ./runs, else .)"
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
        "--check",
        action="store_true",
        help="with --once: exit 1 when any alert is critical (a diverged or failed job, NaN "
        "loss, a highly input-bound job), else 0; for cron, Slurm epilogues and CI",
    )
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
    if args.check and not args.once:
        parser.error("--check needs --once")
    if args.refresh <= 0:
        parser.error("--refresh must be positive")
    if args.simulate_gpus < 0 or args.max_points < 2:
        parser.error("--simulate-gpus must be >= 0 and --max-points >= 2")
    logdirs = tuple(Path(p) for p in args.logdirs) or _default_logdirs()
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
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    try:
        missing = [str(p) for p in options.logdirs if not p.is_dir()]
        if missing:
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

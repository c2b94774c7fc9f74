"""`distagent`: the training agent's command line.

Each subcommand's handler lives in its own module and is imported only when that subcommand
runs, so `distagent --help` answers without loading TensorFlow. Handlers take the parsed
arguments and return the exit code; user errors (`DistmonError`) end as one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import cast

from distagent.quiet import QuietStderr
from distcore import __version__
from distcore.errors import DistmonError

Handler = Callable[[argparse.Namespace], int]


VERBOSE_HELP = "show TensorFlow's start-up messages (hidden by default; errors always show)"


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="the job's TOML config file")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key; VALUE is TOML (e.g. train.epochs=3), else a string",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distagent",
        description="Train TensorFlow models with MirroredStrategy or MultiWorkerMirroredStrategy.",
    )
    parser.add_argument("--version", action="version", version=f"distagent {__version__}")
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    start = sub.add_parser("start", help="train a job (resumes from the run's checkpoints)")
    _add_config_args(start)
    start.add_argument("--detach", action="store_true", help="run in the background")
    start.add_argument(
        "--task-index", type=int, default=None, help="this worker's index in [cluster] workers"
    )
    start.set_defaults(handler="distagent.commands.start:run")

    plan = sub.add_parser("plan", help="resolve devices, batch and learning rate without training")
    _add_config_args(plan)
    plan.add_argument("--json", action="store_true", help="print one JSON object")
    plan.set_defaults(handler="distagent.commands.plan:run")

    bench = sub.add_parser("bench-input", help="time the input pipeline alone: optimized vs naive")
    _add_config_args(bench)
    bench.add_argument("--batches", type=int, default=50, help="batches to time (default 50)")
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.set_defaults(handler="distagent.commands.bench_input:run")

    status = sub.add_parser("status", help="a table of the runs under LOGDIR")
    status.add_argument("logdir", nargs="?", default="runs", help="default: ./runs")
    status.add_argument("--json", action="store_true", help="print one JSON list")
    status.set_defaults(handler="distagent.commands.status:run")

    stop = sub.add_parser("stop", help="stop a running job cleanly (SIGTERM, checkpoint, exit)")
    stop.add_argument("run_dir", help="the run directory (holds run.json)")
    stop.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
    stop.set_defaults(handler="distagent.commands.stop:run")

    launch = sub.add_parser("launch-local", help="run a multi-worker job as N local processes")
    _add_config_args(launch)
    launch.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    launch.set_defaults(handler="distagent.commands.launch_local:run")

    scale = sub.add_parser("scale", help="measure throughput at several replica counts")
    _add_config_args(scale)
    scale.add_argument("--replicas", default="1,2,4", metavar="N,N,...",
                       help="replica counts to train at (default 1,2,4)")
    scale.add_argument("--steps", type=int, default=50, help="timed steps per count (default 50)")
    scale.add_argument("--json", action="store_true", help="print one JSON object")
    scale.set_defaults(handler="distagent.commands.scale:run")
    for command in sub.choices.values():  # `distagent start --verbose ...` works too
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                             help=VERBOSE_HELP)
    return parser


def _resolve(spec: str) -> Handler:
    module_name, _, attr = spec.partition(":")
    return cast(Handler, getattr(importlib.import_module(module_name), attr))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet = None
    if not args.verbose:
        # TensorFlow's C++ INFO and WARNING lines (CPU features, CUDA probing) drown the agent's
        # own output; errors still show. Lines logged before absl starts ignore this setting:
        # a process started from the command line filters them (distagent.quiet).
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        if argv is None:
            quiet = QuietStderr().start()
    try:
        return _resolve(args.handler)(args)
    except DistmonError as err:
        print(f"distagent: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    finally:
        if quiet is not None:
            quiet.close()


if __name__ == "__main__":
    sys.exit(main())

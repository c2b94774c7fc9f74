"""`distagent`: the training agent's command line.

Each subcommand's handler lives in its own module and is imported only when that subcommand
runs, so `distagent --help` answers without loading TensorFlow. Handlers take the parsed
arguments and return the exit code; user errors (`DistmonError`) end as one line on stderr.

Every command writes safely to any terminal or pipe: error lines go through
`distcore.textsafe.terminal_text`, stdout and stderr never raise on characters their encoding
lacks (backslashreplace), and a reader that closes the pipe early (`distagent status | head -1`)
ends the command quietly, with the shell's status for SIGPIPE (141).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import cast

from distagent.quiet import QuietStderr
from distcore import __version__
from distcore.cli_parser import OneLineParser
from distcore.errors import ConfigErrors, DistmonError
from distcore.textsafe import terminal_text

Handler = Callable[[argparse.Namespace], int]
BROKEN_PIPE_EXIT = 128 + 13  # what a shell reports for a command killed by SIGPIPE
MISSING_EXTRA_EXIT = 2  # a user's error, as DistmonError's
ERROR_LINE_LIMIT = 2000  # characters per error line: a 10,000-character name is elided


VERBOSE_HELP = "show TensorFlow's start-up messages (hidden by default; errors always show)"
# The modules of the `agent` extra (tests/test_dependencies.py holds it to pyproject.toml): a
# plain `pip install distmon` has the dashboard and `distagent status`/`stop` only, and a command
# that needs one of these says what to install instead of ending in a traceback.
AGENT_MODULES = frozenset({"tensorflow", "keras", "tomli_w"})
EXTRA_HINT = "pip install 'distmon[agent]' (or '.[agent]' in a checkout)"


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
    parser = OneLineParser(
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

    profile = sub.add_parser("profile", help="profile the next steps of a running job")
    profile.add_argument("run_dir", help="the run directory (holds run.json)")
    profile.add_argument("--steps", type=int, default=10, help="steps to profile (default 10)")
    profile.add_argument("--timeout", type=float, default=120.0,
                         help="seconds to wait for the profile (default 120)")
    profile.set_defaults(handler="distagent.commands.profile:run")

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
    _never_raise_on_encoding()
    try:
        try:
            return _dispatch(argv)
        finally:  # on SystemExit too (--help): a closed pipe shows here, not at interpreter exit
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_closed_pipe()
        return BROKEN_PIPE_EXIT


def _dispatch(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    # Only a real command line may re-execute itself (`start` does, to record its identity).
    args.from_command_line = argv is None
    quiet = None
    if not args.verbose:
        # TensorFlow's C++ INFO and WARNING lines (CPU features, CUDA probing) drown the agent's
        # own output; errors still show. Lines logged before absl starts ignore this setting:
        # a process started from the command line filters them (distagent.quiet).
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        if argv is None and not QuietStderr.inherited():
            quiet = QuietStderr().start()
    try:
        return _resolve(args.handler)(args)
    except DistmonError as err:
        print(error_text(err), file=sys.stderr)
        return err.exit_code
    except ModuleNotFoundError as err:
        missing = (err.name or "").partition(".")[0]
        if missing not in AGENT_MODULES:
            raise
        print(f"distagent: {args.command} needs {missing}, which this install lacks: "
              f"{EXTRA_HINT}", file=sys.stderr)  # fmt: skip
        return MISSING_EXTRA_EXIT
    except KeyboardInterrupt:
        return 130
    finally:
        if quiet is not None:
            quiet.close()


def error_text(err: DistmonError) -> str:
    """`distagent: ` and the error, every outside string in it escaped; one line per problem."""
    lines = [str(e) for e in err.errors] if isinstance(err, ConfigErrors) else str(err).split("\n")
    return "\n".join(terminal_text(line, ERROR_LINE_LIMIT) for line in (f"distagent: {lines[0]}",
                                                                         *lines[1:]))


def _never_raise_on_encoding() -> None:
    """A strict or non-UTF-8 stdout (LANG=C, PYTHONIOENCODING=ascii) writes \\xNN, never raises."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _silence_closed_pipe() -> None:
    """Python's advice for SIGPIPE: point the closed streams at /dev/null, so that the flush at
    interpreter exit does not report the same broken pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # no descriptor (captured in tests)
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())

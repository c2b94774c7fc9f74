"""`distmon [LOGDIR ...]`: the dashboard, or with `--once` a one-shot report.

The edge where outside input meets the terminal: every user error is one line and exit 2, a
crash is one line, a log file and a non-zero exit, running out of file descriptors is one line
and exit 1, a closed pipe ends quietly, and a strict or non-UTF-8 stdout never raises. What
the command line accepts is distmon.flags, and distmon.arguments checks it into `Options`;
this module runs them.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import os
import resource
import sys
from collections.abc import Sequence
from pathlib import Path

from distcore.errors import DistmonError
from distcore.textsafe import terminal_text
from distmon.arguments import parse_options

BROKEN_PIPE_EXIT = 128 + 13  # what a shell reports for a writer killed by SIGPIPE
INTERRUPTED_EXIT = 130
OUT_OF_FILES_EXIT = 1  # not a usage error (2): the same command works under a higher limit


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


WAIT_POLL_SECONDS = 0.5


def wait_for_logdirs(paths: Sequence[Path], *, poll: float = WAIT_POLL_SECONDS) -> None:
    """A LOGDIR that does not exist yet (a job about to start writes it): say so once on
    stderr, then wait until it appears. Only for the dashboard and --serve, which watch; a
    one-shot report (--once) has nothing to wait for and says it is missing."""
    import time

    for path in paths:
        said = False
        while not os.path.lexists(path):
            if not said:
                print(f"distmon: waiting for {terminal_text(path, 300)} to be created "
                      "(Ctrl-C to quit)", file=sys.stderr, flush=True)
                said = True
            time.sleep(poll)


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
        # Textual draws on stderr: both must be terminals, or escape codes go into a file.
        if not options.serve and not options.once and \
                not (_is_terminal(sys.stdout) and _is_terminal(sys.__stderr__)):
            options = dataclasses.replace(options, once=True)
        if not options.remotes:  # with remote sources: one line among the others (--once)
            if not options.once:  # the dashboard and --serve watch: a logdir may come later
                wait_for_logdirs(options.logdirs)
            for logdir in options.logdirs:
                check_logdir(logdir)
        if options.serve:  # headless: no terminal needed
            from distmon.serve import run_serve

            return run_serve(options)
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
    """numpy's OpenBLAS starts a thread per core as it loads, CPU and time on the dashboard's
    way to its first row (docs/benchmarks.md). distmon does no linear algebra, so one is
    enough; a value the user set is kept (and seen by child processes)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def out_of_files_line(err: OSError) -> str | None:
    """One line for running out of descriptors (a low `ulimit -n`, a unit's LimitNOFILE=), the
    user's to fix; None for any other OSError (a bug: a crash report)."""
    if err.errno == errno.EMFILE:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return (f"out of file descriptors: {err.strerror} (at this process's limit of {limit}: "
                "raise it with ulimit -n, or LimitNOFILE= in a systemd unit)")
    if err.errno == errno.ENFILE:
        return f"out of file descriptors: {err.strerror} (the system's limit, fs.file-max)"
    return None


def _out_of_files(err: OSError) -> int:
    line = out_of_files_line(err)
    if line is None:
        from distmon.crash import report_crash

        return report_crash(err)
    print(f"distmon: {line}", file=sys.stderr)
    return OUT_OF_FILES_EXIT


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
        except OSError as err:
            code = _out_of_files(err)
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

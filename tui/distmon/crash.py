"""When distmon itself fails: the traceback goes to a log file, the terminal gets one line.

The log is private (a new file, 0600, in a directory of ours that no one else can write,
created 0700: `distcore.safefile.write_private`), and secrets in argv (`--storage-option
secret=...`, a `--password` value, `user:pass@` in a URL) are replaced by `***` before it is
written. The fallback directory is in the shared `$TMPDIR`, where another user may have created
`distmon-<uid>` (or a symlink by that name) first: such a directory is refused, and the log goes
to a fresh `mkdtemp` directory instead.

A crash never exits 0. Textual's `App.run()` returns after an unhandled exception (with
`return_code` 1 and the return value None) and prints a long traceback with locals on stderr;
`run_guarded` keeps that traceback for the log file instead, and returns non-zero.
"""

from __future__ import annotations

import io
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from distcore import __version__
from distcore.safefile import write_private
from distcore.textsafe import terminal_text

if TYPE_CHECKING:
    from textual.app import App

CRASH_EXIT = 1


def state_dirs(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """Where crash logs go, in order of preference (XDG base directory spec, then a temp dir)."""
    xdg = environ.get("XDG_STATE_HOME", "")
    # The spec says a relative XDG_STATE_HOME is invalid and must be ignored.
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return [base / "distmon", Path(tempfile.gettempdir()) / f"distmon-{os.getuid()}"]


# A name that holds a secret: `secret_access_key`, `token`, `password`, `api-key`, `key` itself
# (not `monkey` or `KeyError`). Its value follows `=` or `:` (argv, a dict's repr).
_SECRET_NAME = (r"(?:[\w.-]*(?:secret|token|passw(?:or)?d|credential|session|auth)[\w.-]*"
                r"|[\w.-]*[_.-]key[\w-]*|\bkey)")
_SECRET_VALUE = re.compile(rf"(?i)({_SECRET_NAME}['\"]?\s*[=:]\s*['\"]?)([^\s'\",&}}]+)")
_SECRET_OPTION = re.compile(rf"(?i)^--?{_SECRET_NAME}$")
_SECRET_ARG = re.compile(rf"(?i)((?:--?[\w-]+=)?{_SECRET_NAME}=).*", re.DOTALL)
_URL_OPTIONS = frozenset({"--notify"})  # options whose whole value is a secret URL
_URL_ARG = re.compile(r"(--notify=).*", re.DOTALL)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*:[^/@\s]*@")


def redact(text: str) -> str:
    """`text` with the value of every secret-looking `name=value` (or `name: value`) and the
    `user:password@` of URLs replaced by `***`."""
    return _URL_USERINFO.sub(r"\1***@", _SECRET_VALUE.sub(r"\1***", text))


def redact_argv(argv: list[str]) -> list[str]:
    """argv as a crash log may hold it: secrets in values redacted, and the argument after a
    secret-named option (`--password hunter2`) or a webhook URL (`--notify URL`, whose path may
    be the secret) replaced whole."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        whole = _SECRET_ARG.fullmatch(arg) or _URL_ARG.fullmatch(arg)  # the whole value
        out.append("***" if hide_next else f"{whole.group(1)}***" if whole else redact(arg))
        hide_next = bool(_SECRET_OPTION.match(arg)) or arg in _URL_OPTIONS
    return out


def write_crash_log(
    error: BaseException, extra: str = "", *, dirs: list[Path] | None = None
) -> Path | None:
    """The traceback (and `extra`, e.g. Textual's rendering of it) in a new private file; its
    path, or None when no directory could take it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    body = "".join(
        [
            f"distmon {__version__} crashed at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n",
            f"argv: {redact_argv(list(sys.argv))!r}\npython: {sys.version}\n\n",
            *traceback.format_exception(error),
            f"\n{redact(extra)}" if extra else "",
        ]
    )
    data = body.encode("utf-8", errors="backslashreplace")
    name = f"crash-{stamp}-{os.getpid()}.log"
    for directory in dirs if dirs is not None else state_dirs():
        try:
            return write_private(directory, name, data)
        except OSError:  # not ours, a link, unwritable: the next one
            continue
    if dirs is not None:
        return None
    try:  # every usual place refused: a new directory that only we can have made
        return write_private(Path(tempfile.mkdtemp(prefix=f"distmon-{os.getuid()}-")), name, data)
    except OSError:
        return None


def report_crash(error: BaseException, extra: str = "", err: TextIO | None = None) -> int:
    """Log `error`, say so in one line on stderr, and return the crash exit status."""
    path = write_crash_log(error, extra)
    where = f"traceback in {terminal_text(path)}" if path else "no log file could be written"
    what = terminal_text(f"{type(error).__name__}: {error}", 200)
    print(f"distmon: crashed ({what}); {where}", file=err or sys.stderr)
    return CRASH_EXIT


def run_guarded(app: App[Any], *, headless: bool = False) -> int:
    """Run the Textual app; the exit status is non-zero when it died of an exception."""
    from rich.console import Console

    captured = io.StringIO()
    # Textual prints its traceback through this console after restoring the terminal.
    app.error_console = Console(file=captured, width=120, color_system=None, markup=False)
    result = app.run(headless=headless)
    # `_exception` is where Textual keeps the first unhandled exception (run_test re-raises it).
    error: BaseException | None = getattr(app, "_exception", None)
    if error is None and captured.getvalue():  # Textual reported an error (a panic) by itself
        error = RuntimeError("the dashboard stopped on an error")
    if error is not None:
        return report_crash(error, captured.getvalue())
    return app.return_code or (result if isinstance(result, int) else 0)

"""When distmon itself fails: the traceback goes to a log file, the terminal gets one line.

A crash never exits 0. Textual's `App.run()` returns after an unhandled exception (with
`return_code` 1 and the return value None) and prints a long traceback with locals on stderr;
`run_guarded` keeps that traceback for the log file instead, and returns non-zero.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from distcore import __version__
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


def write_crash_log(
    error: BaseException, extra: str = "", *, dirs: list[Path] | None = None
) -> Path | None:
    """The traceback (and `extra`, e.g. Textual's rendering of it) in a new file; its path, or
    None when no directory could take it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    body = "".join(
        [
            f"distmon {__version__} crashed at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n",
            f"argv: {sys.argv!r}\npython: {sys.version}\n\n",
            *traceback.format_exception(error),
            f"\n{extra}" if extra else "",
        ]
    )
    for directory in dirs if dirs is not None else state_dirs():
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = directory / f"crash-{stamp}-{os.getpid()}.log"
            path.write_text(body, encoding="utf-8", errors="backslashreplace")
            return path
        except OSError:
            continue
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

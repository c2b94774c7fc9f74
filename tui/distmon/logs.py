"""Where distmon's own log records go (Python logging of `distcore` and `distmon`).

A producer's failure reaches the user as its ProducerError (the dashboard's error panel and
status line, the --once report); the log keeps the traceback for whoever debugs it:

- `DISTMON_LOG=FILE`: every record, debug level up (the failures handed to a producer's
  on_error too), with its traceback, appended to FILE. Nothing of it on the terminal.
- the dashboard, without it: nowhere. Without a handler, Python's last resort writes to
  `sys.stderr`, which Textual holds while it runs (the text went nowhere in a terminal, and onto
  the output of headless runs), and which is the terminal again while it starts and stops.
- `--once`, without it: one escaped line per warning or error on stderr, naming the variable
  that keeps the traceback; the report itself says what failed.
- `--serve` is left as it was: a service's stderr is its log, tracebacks included.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Literal, TextIO

from distcore.errors import DistmonError
from distcore.textsafe import terminal_text

LOG_ENV = "DISTMON_LOG"
LOGGERS = ("distcore", "distmon")
Mode = Literal["dashboard", "once"]


class OneLine(logging.Formatter):
    """`distmon: LOGGER: message: ErrorType: error (DISTMON_LOG=FILE keeps the traceback)`."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"distmon: {record.name}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            err = record.exc_info[1]
            text += f": {type(err).__name__}: {err} ({LOG_ENV}=FILE keeps the traceback)"
        return terminal_text(text, 500)


def configure(mode: Mode, stderr: TextIO,
              environ: Mapping[str, str] = os.environ) -> Callable[[], None]:
    """Set up distmon's loggers for `mode`; returns what undoes it (tests, a caller going on).
    DistmonError (one line) when DISTMON_LOG names a file that cannot be opened."""
    path = environ.get(LOG_ENV, "")
    handler: logging.Handler
    level = logging.WARNING
    if path:
        try:
            handler = logging.FileHandler(path, encoding="utf-8", errors="backslashreplace")
        except OSError as err:
            raise DistmonError(f"{LOG_ENV}={terminal_text(path, 300)}: cannot open "
                               f"({err.strerror or type(err).__name__})") from None
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(process)d %(threadName)s %(name)s %(levelname)s: %(message)s"))
        level = logging.DEBUG
    elif mode == "once":
        handler = logging.StreamHandler(stderr)
        handler.setFormatter(OneLine())
    else:
        handler = logging.NullHandler()
    handler.setLevel(level)
    loggers = [logging.getLogger(name) for name in LOGGERS]
    before = [(logger, logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False  # the record is ours to place: not the root's handlers too

    def undo() -> None:
        for logger, old_level, old_propagate in before:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
            logger.propagate = old_propagate
        handler.close()

    return undo

"""`distagent status [LOGDIR] [--json]`: the runs under LOGDIR, from their run.json files.

A run recorded as running whose process on this machine is gone (killed with SIGKILL, its pid
reused since) shows as `died`; one whose process is not proven to be the run otherwise (another
machine's, a pid that was never its own) as `running (dead)`. `distagent start` on the same
config resumes either from its checkpoint. No TensorFlow is loaded.

Anyone who can write the logdir can write run.json, so every value in it is shown through
`distcore.textsafe` (escaped and elided in the table, undecodable bytes as \\xNN in JSON) and a
value of the wrong type shows as "-", never a traceback. A run.json that cannot be read (a FIFO,
a link, a directory, not JSON, too big) still lists its run: status "unreadable", and the reason
on a warning line under the table (`problem` in JSON). Nothing is opened that could block.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distagent.train.rundir import find_runs, is_same_process
from distcore import names
from distcore.bounded import PERF_RANGES, bounded_int, perf_value, step
from distcore.errors import DistmonError
from distcore.jobs.agent import read_run_json_or_why
from distcore.jobs.liveness import process_gone
from distcore.textsafe import json_text, terminal_text

COLUMNS = ("RUN", "STATUS", "STEP", "LOSS", "EX/S", "INPUT WAIT")
NAME_WIDTH = 60
STATUS_WIDTH = 24
NUMBER_WIDTH = 20


def run(args: argparse.Namespace) -> int:
    logdir = Path(args.logdir)
    if not logdir.is_dir():
        raise DistmonError(f"{terminal_text(logdir, 200)}: no such directory")
    rows = [run_summary(logdir, run_dir) for run_dir in find_runs(logdir)]
    if args.json:
        print(json.dumps([_json_ready(r) for r in rows]))
    elif not rows:
        print(f"no runs under {terminal_text(logdir, 200)}")
    else:
        print(format_table([table_row(r) for r in rows]))
        for row in rows:
            if row["problem"]:
                print(terminal_text(f"warning: {row['name']}: {row['problem']}", 300))
    return 0


def run_summary(logdir: Path, run_dir: Path) -> dict[str, Any]:
    found, why = read_run_json_or_why(run_dir)
    record = found or {}
    status = record.get("status")
    alive = is_same_process(record, run_dir) if status == names.STATUS_RUNNING else False
    died = status == names.STATUS_RUNNING and not alive and process_gone(record)
    metrics = record.get("metrics")
    return {
        "name": str(run_dir.relative_to(logdir)) if run_dir != logdir else run_dir.name,
        "run_dir": str(run_dir),
        "status": status,
        "alive": alive,
        "died": died,
        # Numbers as distmon reads them (distcore.bounded): a 400-digit step is unknown.
        "pid": bounded_int(record.get("pid"), 0),
        "last_step": step(record.get("last_step")),
        "total_steps": bounded_int(record.get("total_steps"), 0),
        "metrics": _metrics(metrics) if isinstance(metrics, dict) else {},
        "error": record.get("error"),
        "message": record.get("message"),
        "problem": None if found is not None else f"run.json unreadable: {why}",
    }


def _metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """run.json's last metrics, a `perf/` one only within its documented range."""
    return {k: perf_value(k, v) if k in PERF_RANGES else v for k, v in metrics.items()}


def _json_ready(value: Any) -> Any:
    """Names from the filesystem keep undecodable bytes as surrogates: written \\xNN, as every
    distmon JSON output writes them. Non-finite numbers are written null (strict JSON)."""
    if isinstance(value, str):
        return json_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {json_text(str(k)): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    return value


def _number(value: Any, spec: str) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    try:
        return terminal_text(format(value, spec), NUMBER_WIDTH)
    except (ValueError, OverflowError):  # NaN for an integer column, ...
        return terminal_text(value, NUMBER_WIDTH)


def table_row(summary: Mapping[str, Any]) -> tuple[str, ...]:
    status = summary.get("status")
    shown = terminal_text(status, STATUS_WIDTH) if isinstance(status, str) and status else "unknown"
    if summary.get("problem"):
        shown = "unreadable"
    elif status == names.STATUS_RUNNING and summary.get("died"):
        shown = names.STATUS_DIED
    elif status == names.STATUS_RUNNING and not summary.get("alive"):
        shown = "running (dead)"
    metrics = summary.get("metrics")
    metrics = metrics if isinstance(metrics, Mapping) else {}
    step = f"{_number(summary.get('last_step'), 'd')}/{_number(summary.get('total_steps'), 'd')}"
    return (
        terminal_text(summary["name"], NAME_WIDTH),
        shown,
        step,
        _number(metrics.get(names.LOSS), ".4f"),
        _number(metrics.get(names.EXAMPLES_PER_SECOND), ",.0f"),
        _number(metrics.get(names.INPUT_WAIT_FRACTION), ".0%"),
    )


def format_table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)

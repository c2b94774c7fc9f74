"""`distagent status [LOGDIR] [--json]`: the runs under LOGDIR, from their run.json files.

A run recorded as running whose process is gone (killed with SIGKILL, or its machine rebooted)
shows as `running (dead)`: `distagent start` on the same config resumes it from its checkpoint.
No TensorFlow is loaded.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distagent.train.rundir import find_runs, is_same_process, read_run_json
from distcore import names
from distcore.errors import DistmonError

COLUMNS = ("RUN", "STATUS", "STEP", "LOSS", "EX/S", "INPUT WAIT")


def run(args: argparse.Namespace) -> int:
    logdir = Path(args.logdir)
    if not logdir.is_dir():
        raise DistmonError(f"{logdir}: no such directory")
    rows = [run_summary(logdir, run_dir) for run_dir in find_runs(logdir)]
    if args.json:
        print(json.dumps(rows))
    elif not rows:
        print(f"no runs under {logdir}")
    else:
        print(format_table([table_row(r) for r in rows]))
    return 0


def run_summary(logdir: Path, run_dir: Path) -> dict[str, Any]:
    record = read_run_json(run_dir) or {}
    status = record.get("status")
    alive = is_same_process(record) if status == names.STATUS_RUNNING else False
    return {
        "name": str(run_dir.relative_to(logdir)) if run_dir != logdir else run_dir.name,
        "run_dir": str(run_dir),
        "status": status,
        "alive": alive,
        "pid": record.get("pid"),
        "last_step": record.get("last_step"),
        "total_steps": record.get("total_steps"),
        "metrics": record.get("metrics") or {},
        "error": record.get("error"),
        "message": record.get("message"),
    }


def _number(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


def table_row(summary: Mapping[str, Any]) -> tuple[str, ...]:
    status = str(summary.get("status") or "unknown")
    if status == names.STATUS_RUNNING and not summary.get("alive"):
        status = "running (dead)"
    metrics = summary.get("metrics") or {}
    step = f"{_number(summary.get('last_step'), 'd')}/{_number(summary.get('total_steps'), 'd')}"
    return (
        str(summary["name"]),
        status,
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

"""`distmon --once [--json] [--check]`: read everything once, print one report, exit.

The report renders the job index's snapshot (distcore.jobs), as the dashboard does: the same
jobs, statuses, hosts and alerts. `--check` exits 1 when any alert is critical.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from distcore.textsafe import json_safe, shown_names, terminal_safe, terminal_text
from distmon.gpus_text import render_gpus_text, render_hosts_text
from distmon.options import Options
from distmon.report import collect

if TYPE_CHECKING:
    from distcore.jobs.model import JobsSnapshot

CRITICAL_EXIT = 1


def _scheduler_text(job: dict[str, Any]) -> str:
    """`, Slurm job 12 (RUNNING)`, `, pod trainer-0`: where the scheduler runs the job."""
    sched = job.get("scheduler")
    if not sched:
        return ""
    if sched.get("kind") == "slurm" and sched.get("job_id"):
        state = f" ({sched['state']})" if sched.get("state") else ""
        return f", Slurm job {terminal_text(sched['job_id'], 40)}{state}"
    if sched.get("pod"):
        return f", pod {terminal_text(sched['pod'], 80)}"
    return ""


def has_critical(snap: JobsSnapshot) -> bool:
    return any(a.severity == "critical" for a in snap.alerts)


def render_text(doc: dict[str, Any], out: TextIO) -> None:
    """The readable report (`--once` without `--json`); outside strings escaped."""

    def num(value: Any) -> str:
        return value if isinstance(value, str) else f"{value:.6g}"

    t = terminal_text
    out.write(f"{len(doc['runs'])} runs in {t(', '.join(doc['logdirs']))}\n")
    for job in doc.get("jobs", ()):
        step = f", step {job['last_step']}" if job.get("last_step") is not None else ""
        out.write(f"job {t(job['name'], 120)}: {job['status']}{step}{_scheduler_text(job)}\n")
    for run in doc["runs"]:
        files = f"{run['files']} file" + ("" if run["files"] == 1 else "s")
        out.write(f"\n{t(run['name'], 200)}  [{run['status']}, {files}]  {t(run['path'], 200)}\n")
        for name, value in run["hparams"].items():
            out.write(f"  hparam {t(name, 80)} = {t(value, 200)}\n")
        shown = shown_names(run["scalars"], 60)  # elided alike: still apart (" #2")
        tags = {shown[tag]: s for tag, s in run["scalars"].items()}
        width = max((len(tag) for tag in tags), default=0)
        for tag, s in tags.items():
            out.write(
                f"  {tag:<{width}}  step {s['last_step']:>8}  last {num(s['last_value']):>12}"
                f"  min {num(s['min']):>12}  max {num(s['max']):>12}  n={s['count']}\n"
            )
        for problem in run["problems"]:
            out.write(f"  problem: {t(problem, 200)}\n")
    out.write("\n")
    render_gpus_text(doc, out)
    render_hosts_text(doc, out)
    _render_alerts(doc["alerts"], out)
    for problem in doc.get("problems", ()):
        out.write(f"problem: {t(problem, 300)}\n")
    for error in doc.get("errors", ()):
        out.write(f"error ({t(error['producer'])}): {t(error['message'], 300)}\n")


# Characters of any one string in the text report; the renderer elides names further (a run's
# name to 200, a tag to 60), and an alert's message keeps its remedy whole.
NAME_LIMIT = 400
_SEVERITY_MARKS = {"critical": "✖", "warning": "▲", "info": "·"}


def _render_alerts(alerts: list[dict[str, Any]], out: TextIO) -> None:
    out.write(f"\nAlerts: {len(alerts) or 'none'}\n")
    for alert in alerts:
        mark = _SEVERITY_MARKS.get(alert["severity"], "?")
        # A GPU alert has no run: it names its host (this machine's too).
        named = alert["run"] or alert.get("host")
        where = terminal_text(named, 120) if named else "all"
        message = terminal_text(alert["message"], 400)
        out.write(f"  {mark} {alert['severity']:<8} {where}: {message}\n")


def run_once(options: Options, out: TextIO | None = None) -> int:
    """Print the report; 0, or with `--check` 1 when any alert is critical."""
    from distcore.jobs.jsonify import to_json

    out = out or sys.stdout
    if options.table or options.csv or options.points:  # the comparison table (issue 20)
        from distmon.table_text import run_table

        return run_table(options, out)
    snap = collect(options)
    doc = to_json(snap)
    if options.json:  # valid JSON whatever the logdir held: no NaN, no lone surrogate
        json.dump(json_safe(doc), out, indent=2, allow_nan=False)
        out.write("\n")
    else:  # every outside string escaped (control characters, ANSI) and elided
        render_text(terminal_safe(json_safe(doc), NAME_LIMIT), out)
    return CRITICAL_EXIT if options.check and has_critical(snap) else 0

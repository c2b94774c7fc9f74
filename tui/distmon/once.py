"""`distmon --once [--json] [--check]`: read everything once, print one report, exit.

The report renders the job index's snapshot (distcore.jobs), as the dashboard does: the same
jobs, statuses, hosts and alerts, its figures read as the panels read them (distmon.formats).
`--json` prints `distcore.jobs.jsonify.to_json` of it; the text renders the typed snapshot.
`--check` exits 1 when an alert is critical, an ended job's only for a while after it ended
(distcore.jobs.ended).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

from distcore.alerts import Alert
from distcore.events.snapshots import RunSnapshot
from distcore.jobs.cost import job_cost, snapshot_prices
from distcore.jobs.ended import failing_alerts
from distcore.jobs.ledger import job_ledger
from distcore.jobs.snapshots import Job, JobsSnapshot, Prices
from distcore.textsafe import json_names, json_safe, name_suffixes, shown_names, terminal_safe
from distcore.textsafe import terminal_text as t
from distcore.wording import counted
from distmon.formats import number, step_text
from distmon.gpus_text import render_gpus_text, render_hosts_text
from distmon.options import Options
from distmon.render.cost import cost_line
from distmon.render.ledger import ledger_line
from distmon.render.profile import profile_lines
from distmon.report import collect

CRITICAL_EXIT = 1
# Characters of any one string in the text report; the renderer elides names further (a run's
# name to 200, a tag to 60), and an alert's message keeps its remedy whole.
NAME_LIMIT = 400
_SEVERITY_MARKS = {"critical": "✖", "warning": "▲", "info": "·"}


def has_critical(snap: JobsSnapshot, ended_within: float) -> bool:
    """A critical alert that `--check` fails on: an ended job's are history after a while."""
    return bool(failing_alerts(snap, ended_within))


def _distinct(names: Iterable[str]) -> dict[str, str]:
    """Each raw name with its suffix where names would print alike (" #2"), as in the JSON."""
    return {raw: raw + suffix for raw, suffix in name_suffixes(names).items()}


def _labels(names: Mapping[str, Any]) -> dict[str, str]:
    """Each key's label as the JSON document's keys read on a terminal: distinct in their JSON
    form, then escaped and elided to NAME_LIMIT (still distinct)."""
    keys = json_names(names)
    shown = terminal_safe(dict.fromkeys(keys[k] for k in names), NAME_LIMIT)
    return dict(zip(names, shown, strict=True))


def _scheduler_text(job: Job) -> str:
    """`, Slurm job 12 (RUNNING)`, `, pod trainer-0`: where the scheduler runs the job."""
    ref = job.agent.scheduler if job.agent is not None else None
    if ref is None:
        return ""
    if ref.kind == "slurm" and ref.job_id:
        known = job.scheduler_state.state if job.scheduler_state is not None else None
        state = f" ({t(known, NAME_LIMIT)})" if known else ""
        return f", Slurm job {t(ref.job_id, 40)}{state}"
    return f", pod {t(ref.pod, 80)}" if ref.pod else ""


def _job_line(job: Job, name: str, prices: Prices) -> str:
    last = job.agent.last_step if job.agent is not None else None
    step = f", step {step_text(last)}" if last is not None else ""
    ledger = job_ledger(job)
    time = f"  time: {ledger_line(ledger)}\n" if ledger is not None else ""
    cost = job_cost(job, prices)
    time += f"  cost: {cost_line(cost)}\n" if cost is not None else ""
    profile = "".join(f"  {line}\n" for line in profile_lines(job.profile)) \
        if job.profile is not None else ""
    return f"job {t(name, 120)}: {job.status}{step}{_scheduler_text(job)}\n{time}{profile}"


def _render_run(run: RunSnapshot, name: str, out: TextIO) -> None:
    files = f"{run.files} file" + ("" if run.files == 1 else "s")
    out.write(f"\n{t(name, 200)}  [{run.status}, {files}]  {t(str(run.path), 200)}\n")
    for key, label in _labels(run.hparams).items():
        value = terminal_safe(json_safe(run.hparams[key]), NAME_LIMIT)  # as the JSON has it
        out.write(f"  hparam {t(label, 80)} = {t(value, 200)}\n")
    labels = _labels(run.scalars)
    shown = shown_names(labels.values(), 60)  # elided alike: still apart (" #2")
    width = max((len(shown[label]) for label in labels.values()), default=0)
    for tag, s in run.scalars.items():
        out.write(
            f"  {shown[labels[tag]]:<{width}}  step {step_text(s.last_step):>8}"
            f"  last {number(s.last_value, 6):>12}  min {number(s.min, 6):>12}"
            f"  max {number(s.max, 6):>12}  n={s.count}\n"
        )
    for problem in run.problems:
        out.write(f"  problem: {t(problem, 200)}\n")


def _render_alerts(alerts: Iterable[Alert], out: TextIO) -> None:
    alerts = tuple(alerts)
    out.write(f"\nAlerts: {len(alerts) or 'none'}\n")
    for alert in alerts:
        mark = _SEVERITY_MARKS.get(alert.severity, "?")
        # A GPU alert has no run: it names its host (this machine's too).
        named = alert.run or alert.host
        where = t(named, 120) if named else "all"
        out.write(f"  {mark} {alert.severity:<8} {where}: {t(alert.message, NAME_LIMIT)}\n")


def render_text(snap: JobsSnapshot, out: TextIO) -> None:
    """The readable report (`--once` without `--json`); outside strings escaped and elided."""
    runs = [run for job in snap.jobs for run in job.parts.values()]
    logdirs = ", ".join(t(d, NAME_LIMIT) for d in snap.logdirs)
    out.write(f"{counted(len(runs), 'run')} in {logdirs}\n")
    jobs = _distinct(j.name for j in snap.jobs)
    prices = snapshot_prices(snap)
    for job in snap.jobs:
        out.write(_job_line(job, jobs[job.name], prices))
    names = _distinct(r.name for r in runs)
    for run in runs:
        _render_run(run, names[run.name], out)
    out.write("\n")
    render_gpus_text(snap.local_telemetry, out)
    render_hosts_text(snap.hosts, snap.generated_at, out)
    _render_alerts(snap.alerts, out)
    for problem in snap.problems:
        out.write(f"problem: {t(problem, 300)}\n")
    for error in snap.errors:
        out.write(f"error ({t(error.producer, NAME_LIMIT)}): {t(error.message, 300)}\n")


@contextmanager
def one_pass_gc(*, remote: bool, last: bool) -> Iterator[None]:
    """Cyclic gc while one pass reads and reports: none over local sources, and young
    collections only where remote clients read too; as it was after. `last`: the process ends
    after the pass (the CLI's own), so what the pass leaves alive is frozen first.

    The pass keeps nearly everything it makes until the report is out (a sweep's hundreds of
    thousands of objects), so collections walk it and free nothing: the full and young ones
    its growth sets off run on the thread that holds the GIL while both readers wait for it
    (docs/benchmarks.md). A local read makes no reference cycles
    at all (tests/tui/test_once_gc.py holds it to that); remote clients' short-lived cycles
    (asyncio, HTTP, SSH) are not ours to bound, and young collections free them.

    After the pass, the first collection would walk all it made, and
    the interpreter's final one at exit all that is still alive, to free memory the process
    hands back on exit anyway: frozen (`gc.freeze`), it is left alone until then. Everything
    else exit does (atexit handlers, thread joins, flushing, module teardown) stays; only
    finalizers of objects in reference cycles do not run at exit, which Python never promises.
    Not in a process that goes on (a test calling the CLI): frozen objects are never
    collected."""
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    if remote:
        gc.set_threshold(thresholds[0], thresholds[1], 1 << 30)
    else:
        gc.disable()
    try:
        yield
    finally:
        if last:
            gc.freeze()
        gc.set_threshold(*thresholds)
        if enabled:
            gc.enable()


def run_once(options: Options, out: TextIO | None = None, *, last: bool = False) -> int:
    """Print the report; 0, or with `--check` 1 when any alert is critical. `last`: the
    process ends after it (see one_pass_gc)."""
    with one_pass_gc(remote=bool(options.remotes), last=last):
        return _report(options, out or sys.stdout)


def _report(options: Options, out: TextIO) -> int:
    if options.table or options.csv or options.points:  # a sweep's comparison table
        from distmon.table_text import run_table

        return run_table(options, out)
    if options.plot is not None:  # the charts, as text
        from distmon.plot_text import run_plot

        return run_plot(options, out)
    snap = collect(options)
    if options.json:  # valid JSON whatever the logdir held: no NaN, no lone surrogate
        from distcore import jsonout  # each run and job written as it is made
        from distcore.jobs.jsonify import document

        jsonout.write(document(snap), out)
    else:  # every outside string escaped (control characters, ANSI) and elided
        render_text(snap, out)
    return CRITICAL_EXIT if options.check and has_critical(snap, options.ended_within) else 0

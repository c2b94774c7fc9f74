"""`distmon --once [--json] [--check]`: read everything once, print one report, exit.

The report renders the job index's snapshot (distcore.jobs), as the dashboard does: the same
jobs, statuses, hosts and alerts. `--check` exits 1 when any alert is critical.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from distcore.errors import DistmonError
from distcore.snapshot import build_snapshot
from distcore.textsafe import json_safe, shown_names, terminal_safe, terminal_text
from distmon.gpus_text import render_gpus_text, render_hosts_text
from distmon.options import Options

if TYPE_CHECKING:
    from distcore.remote import RemoteProducers
    from distcore.remote.spec import SshSpec, UrlSpec

CRITICAL_EXIT = 1


def collect(options: Options) -> dict[str, Any]:
    """The version-1 document: the reader's runs (local and remote), this host's GPUs, and the
    index's jobs, hosts, alerts and errors, from one pass over every source and one sample."""
    # Imported here so that the dashboard's own start-up does not pay for the protos.
    from distcore.events import LogdirWatcher, RunStore
    from distcore.events.jsonify import runs_to_json
    from distcore.jobs.index import JobIndex
    from distcore.jobs.jsonify import index_to_json
    from distcore.jobs.scheduler import SlurmStates
    from distcore.telemetry import make_source
    from distcore.telemetry.jsonify import telemetry_to_json
    from distcore.telemetry.sampler import TelemetrySampler

    store = RunStore(max_points=options.max_points)
    local = [p for p in options.logdirs if p.is_dir()]
    watcher = LogdirWatcher(local, store, poll=options.poll)
    watcher.scan_once()
    remote = _scan_remote(options, store)
    source = make_source(no_gpu=options.no_gpu, simulate_gpus=options.simulate_gpus)
    sampler = TelemetrySampler(source, interval=options.refresh)
    try:
        telemetry = sampler.sample_once()
    finally:
        sampler.close()
    slurm = SlurmStates()  # asked once below, on this thread: --once has no UI to keep alive
    try:
        logdirs = [str(p.resolve()) for p in options.logdirs]
        logdirs += [_spec_text(s) for s in options.remotes]
        index = JobIndex(
            store, logdirs=logdirs, telemetry=sampler, interval=options.refresh,
            hosts=remote.host_sources if remote else (),
            producers=(watcher, remote, slurm) if remote else (watcher, slurm),
        )  # fmt: skip
        snap = index.refresh()
        if snap is not None and slurm.query_once():  # the jobs' Slurm states, then judge again
            snap = index.refresh()
        if snap is None:  # the index failed: its error says why
            raise RuntimeError("; ".join(e.message for e in index.errors()) or "job index failed")
    finally:
        if remote is not None:
            remote.close()
    gpus, host = telemetry_to_json(telemetry)
    doc = build_snapshot(
        generated_at=snap.generated_at,
        logdirs=logdirs,
        runs=runs_to_json(run for job in snap.jobs for run in job.parts.values()),
        gpus=gpus,
        host=host,
        alerts=[],
    )
    doc.update(index_to_json(snap))
    missing = [p for p in options.logdirs if p not in local]
    doc["errors"] = [
        {"producer": "logdir", "message": f"{p}: no such log directory", "since": snap.generated_at}
        for p in missing
    ] + doc["errors"]
    # Exit 2 when no source at all could be read: every logdir missing and no remote read
    # (also when every source is remote).
    if not local and not (remote and remote.readable()):
        raise DistmonError("\n".join(e["message"] for e in doc["errors"]) or "nothing readable")
    return doc


def _scan_remote(options: Options, store: Any) -> RemoteProducers | None:
    """host:PATH and URLs read once into the same store, remote GPUs sampled once (issue 14)."""
    if not options.remotes:
        return None
    from distcore.remote import make_remote_producers
    from distcore.remote.wiring import scan_remote_once

    remote = make_remote_producers(
        options.remotes, store, refresh=options.refresh, ssh_config=options.ssh_config,
        storage_options=options.storage_options, gpus=not options.no_gpu,
    )  # fmt: skip
    try:
        scan_remote_once(remote)
    except BaseException:
        remote.close()
        raise
    return remote


def _spec_text(spec: SshSpec | UrlSpec) -> str:
    from distcore.remote.spec import UrlSpec

    return spec.url if isinstance(spec, UrlSpec) else f"{spec.host}:{spec.path}"


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


def has_critical(doc: dict[str, Any]) -> bool:
    return any(a.get("severity") == "critical" for a in doc.get("alerts", ()))


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
        where = terminal_text(alert["run"], 120) if alert["run"] else "all"
        message = terminal_text(alert["message"], 400)
        out.write(f"  {mark} {alert['severity']:<8} {where}: {message}\n")


def run_once(options: Options, out: TextIO | None = None) -> int:
    """Print the report; 0, or with `--check` 1 when any alert is critical."""
    out = out or sys.stdout
    if options.table or options.csv or options.points:  # the comparison table (issue 20)
        from distmon.table_text import run_table

        return run_table(options, out)
    doc = collect(options)
    if options.json:  # valid JSON whatever the logdir held: no NaN, no lone surrogate
        json.dump(json_safe(doc), out, indent=2, allow_nan=False)
        out.write("\n")
    else:  # every outside string escaped (control characters, ANSI) and elided
        render_text(terminal_safe(json_safe(doc), NAME_LIMIT), out)
    return CRITICAL_EXIT if options.check and has_critical(doc) else 0

"""`distmon --once [--json]`: read everything once, print one report, exit 0.

The document is assembled from three seams, one per source: the runs (distcore.events), the GPUs
and host (distcore.telemetry) and the alerts (pure rules over the other two).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from distcore.errors import DistmonError
from distcore.snapshot import build_snapshot
from distcore.textsafe import json_safe, terminal_safe
from distmon.gpus_text import render_gpus_text
from distmon.options import Options

if TYPE_CHECKING:
    from distcore.events.model import RunSnapshot
    from distcore.remote.spec import SshSpec, UrlSpec
    from distcore.remote.wiring import RemoteOnce
    from distmon.widgets.model import Plan


def _runs(options: Options) -> tuple[RunSnapshot, ...]:
    """Every run under the logdirs (reader issue)."""
    # Imported here so that the dashboard's own start-up does not pay for the protos.
    from distcore.events import load_once

    return load_once(options.logdirs, poll=options.poll, max_points=options.max_points)


def _telemetry(options: Options) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The `gpus` and `host` objects (telemetry issue)."""
    from distcore.telemetry import make_source
    from distcore.telemetry.jsonify import telemetry_to_json

    source = make_source(no_gpu=options.no_gpu, simulate_gpus=options.simulate_gpus)
    try:
        return telemetry_to_json(source.sample())
    finally:
        source.close()


def _alerts(runs: Sequence[RunSnapshot], gpus: dict[str, Any]) -> list[dict[str, Any]]:
    """Alerts computed from the runs' kept points and the GPUs (dashboard issue).

    The rules see each series' curve (loss rising, points that stopped arriving), not only the
    last point that the JSON carries.
    """
    from distcore.alerts import evaluate, gpu_from_json
    from distmon.widgets.model import job_dir_of, read_plan

    plans: dict[Path, Plan | None] = {}  # train/, validation/ and system/ share one run.json
    agent_status = {}
    for run in runs:
        job_dir = job_dir_of(run)
        if job_dir not in plans:
            plans[job_dir] = read_plan(job_dir)
        plan = plans[job_dir]
        if plan is not None and plan.status:
            agent_status[run.name] = plan.status
    found = evaluate(
        runs,
        [gpu_from_json(g) for g in gpus.get("devices", [])],
        now=time.time(),
        agent_status=agent_status,
    )
    return [a.to_json() for a in found]


def collect(options: Options) -> dict[str, Any]:
    from distcore.events.jsonify import run_to_json

    runs = _runs(options)
    remote = _remote(options)
    if remote is not None:
        runs = (*runs, *remote.runs)
    gpus, host = _telemetry(options)
    doc = build_snapshot(
        generated_at=time.time(),
        logdirs=[str(p.resolve()) for p in options.logdirs],
        runs=[run_to_json(run) for run in runs],
        gpus=gpus,
        host=host,
        alerts=_alerts(runs, gpus),
    )
    if remote is not None:  # issue 14: remote hosts' GPUs, and one line per failed source
        from distcore.remote.wiring import host_to_json

        doc["logdirs"] += [_spec_text(s) for s in options.remotes]
        doc["hosts"] = [host_to_json(h) for h in remote.hosts]
        missing = [f"{p}: no such log directory" for p in options.logdirs if not p.is_dir()]
        doc["errors"] = [*missing, *remote.errors]
        if not remote.readable and len(missing) == len(options.logdirs):
            raise DistmonError("\n".join(doc["errors"]) or "no source could be read")
    return doc


def _remote(options: Options) -> RemoteOnce | None:
    if not options.remotes:
        return None
    from distcore.remote.wiring import read_remote_once

    return read_remote_once(
        options.remotes, max_points=options.max_points, ssh_config=options.ssh_config,
        storage_options=options.storage_options, gpus=not options.no_gpu,
    )  # fmt: skip


def _spec_text(spec: SshSpec | UrlSpec) -> str:
    from distcore.remote.spec import UrlSpec

    return spec.url if isinstance(spec, UrlSpec) else f"{spec.host}:{spec.path}"


def render_text(doc: dict[str, Any], out: TextIO) -> None:
    """The readable table (`--once` without `--json`)."""

    def num(value: Any) -> str:
        return value if isinstance(value, str) else f"{value:.6g}"

    out.write(f"{len(doc['runs'])} runs in {', '.join(doc['logdirs'])}\n")
    for run in doc["runs"]:
        files = f"{run['files']} file" + ("" if run["files"] == 1 else "s")
        out.write(f"\n{run['name']}  [{run['status']}, {files}]  {run['path']}\n")
        for name, value in run["hparams"].items():
            out.write(f"  hparam {name} = {value}\n")
        tags = run["scalars"]
        width = max((len(t) for t in tags), default=0)
        for tag, s in tags.items():
            out.write(
                f"  {tag:<{width}}  step {s['last_step']:>8}  last {num(s['last_value']):>12}"
                f"  min {num(s['min']):>12}  max {num(s['max']):>12}  n={s['count']}\n"
            )
        for problem in run["problems"]:
            out.write(f"  problem: {problem}\n")
    out.write("\n")
    render_gpus_text(doc, out)
    _render_remote(doc, out)
    _render_alerts(doc["alerts"], out)


def _render_remote(doc: dict[str, Any], out: TextIO) -> None:
    """Remote hosts' GPUs and the sources that could not be read (issue 14). The document is
    already terminal-safe (run_once escapes it whole)."""
    from distmon.gpus_text import gpu_line

    for host in doc.get("hosts", []):
        state = host["error"] or host["gpu_reason"] or f"{len(host['gpus'])} GPU(s)"
        out.write(f"Host {host['name']} (ssh): {state}\n")
        for dev in host["gpus"]:
            out.write(gpu_line(dev) + "\n")
    for line in doc.get("errors", []):
        out.write(f"error: {line}\n")


NAME_LIMIT = 160  # characters of one name or message in the text report
_SEVERITY_MARKS = {"critical": "✖", "warning": "▲", "info": "·"}


def _render_alerts(alerts: list[dict[str, Any]], out: TextIO) -> None:
    out.write(f"\nAlerts: {len(alerts) or 'none'}\n")
    for alert in alerts:
        mark = _SEVERITY_MARKS.get(alert["severity"], "?")
        out.write(f"  {mark} {alert['severity']:<8} {alert['run']}: {alert['message']}\n")


def run_once(options: Options, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    doc = collect(options)
    if options.json:  # valid JSON whatever the logdir held: no NaN, no lone surrogate
        json.dump(json_safe(doc), out, indent=2, allow_nan=False)
        out.write("\n")
    else:  # every outside string escaped (control characters, ANSI) and elided
        render_text(terminal_safe(json_safe(doc), NAME_LIMIT), out)
    return 0

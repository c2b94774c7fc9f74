"""`distmon --once --json`'s document (snapshot version 2), built by `to_json` from one
`JobsSnapshot`: the base keys of distcore.snapshot (runs through distcore.events.jsonify, this
machine's `gpus` and `host` through distcore.telemetry.jsonify), then, additive to version 1:
`hosts` (every host seen: this machine first, then each worker's `system/` samples, then remote
hosts), `jobs` (each with its `ledger`: where its wall time went), `errors` and `problems`;
version 2 adds each job's `profile` (its latest TensorFlow profile's summary, or why it could
not be read).
Names from outside go through `json_text` (undecodable bytes as `\\xNN`); numbers through
`json_float`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distcore.alerts.efficiency import job_mfu
from distcore.jobs.cost import cost_to_json, ledger_cost, snapshot_prices
from distcore.jobs.hosts import host_age, is_stale
from distcore.jobs.ledger import Ledger, job_ledger
from distcore.jobs.snapshots import Host, Job, JobsSnapshot, Prices
from distcore.producer import ProducerError
from distcore.profile import ProfileError, ProfileSummary
from distcore.snapshot import SNAPSHOT_VERSION, json_float
from distcore.telemetry.jsonify import device_to_json, telemetry_to_json
from distcore.textsafe import json_names, json_safe, json_text


def host_to_json(host: Host, now: float) -> dict[str, Any]:
    age = host_age(host, now)
    return {
        "key": json_text(host.key),
        "name": json_text(host.name),
        "worker": host.worker,
        "source": host.source,
        "job": json_text(host.job) if host.job is not None else None,
        "age_seconds": json_float(None if age is None else round(age, 3)),
        "stale": is_stale(host, now),
        "simulated": host.simulated,
        "gpus": [device_to_json(g) for g in host.gpus],
        "gpu_reason": host.gpu_reason,
        "gpm_reason": host.gpm_reason,
        "cpu_percent": json_float(host.cpu_percent),
        "memory_used_mib": json_float(host.memory_used_mib),
        "memory_total_mib": json_float(host.memory_total_mib),
        "error": host.error,
    }


def scheduler_to_json(job: Job) -> dict[str, Any] | None:
    """run.json's scheduler (Slurm job, step, nodes, partition; or a Kubernetes pod) and what
    the scheduler says of the job (`state` None where it did not answer)."""
    ref = job.agent.scheduler if job.agent is not None else None
    if ref is None:
        return None
    state = job.scheduler_state

    def text(value: str | None) -> str | None:
        return json_text(value) if value is not None else None

    return {
        "kind": json_text(ref.kind),
        "job_id": text(ref.job_id),
        "step_id": text(ref.step_id),
        "node_list": text(ref.node_list),
        "partition": text(ref.partition),
        "pod": text(ref.pod),
        "state": state.state if state is not None else None,
        "reason": text(state.reason) if state is not None else None,
    }


def job_to_json(job: Job, name: str | None = None,
                prices: Prices | None = None) -> dict[str, Any]:
    agent = job.agent
    parts = json_names(job.parts)
    ledger = job_ledger(job)  # once: the cost is the ledger's too
    return {
        "name": json_text(job.name) if name is None else name,
        "path": json_text(str(job.directory)) if job.directory is not None else None,
        "status": job.status,
        "parts": [parts[p] for p in job.parts],
        "last_step": agent.last_step if agent is not None else None,
        "mfu": json_float(job_mfu(job.parts)),
        "error": json_text(agent.error) if agent is not None and agent.error else None,
        "scheduler": scheduler_to_json(job),
        "workers": workers_to_json(job),
        "ledger": ledger_to_json(ledger),
        "cost": cost_to_json(ledger_cost(job, prices or Prices(), ledger)),
        "profile": profile_to_json(job.profile),
    }


def profile_to_json(profile: ProfileSummary | ProfileError | None) -> dict[str, Any] | None:
    """The job's latest profile: `kind` "summary" (the step split in ms, all steps together in
    `total`, the tf.data stages, the bottleneck and its remedy, the top ops, the GPU streams;
    not each step) or "error" (`message`: the one line shown for it)."""
    if profile is None:
        return None
    doc = profile.to_json()
    if isinstance(profile, ProfileError):
        doc["message"] = profile.message
    else:
        doc.pop("steps", None)
    return dict(json_safe(doc))


def ledger_to_json(ledger: Ledger | None) -> dict[str, Any] | None:
    """Where the job's wall time went: `seconds` per bucket (null: not measured), the wall,
    goodput, and where the figures come from ("agent": run.json, "scalars": the `time/` tags,
    "events": only the points' span and the gaps between them)."""
    if ledger is None:
        return None
    return {
        "source": ledger.source,
        "wall_seconds": json_float(ledger.wall_seconds),
        "goodput": json_float(ledger.goodput),
        "seconds": {b: json_float(v) for b, v in ledger.buckets.items()},
        "gaps": ledger.gaps,
        "gap_seconds": json_float(ledger.gap_seconds),
        "measured_at": json_float(ledger.measured_at),
    }


def workers_to_json(job: Job) -> list[dict[str, Any]]:
    """Each worker's heartbeat (distagent's), its straggler scores and its stack dump's path."""
    from distcore.alerts.stragglers import score_workers

    beats = job.agent.workers if job.agent is not None else ()
    scores = {s.worker: s.to_json() for s in score_workers(beats)}
    out = []
    for beat in beats:
        stacks = str(job.directory.joinpath(beat.stacks)) \
            if beat.stacks and job.directory is not None else beat.stacks
        out.append({
            "worker": beat.worker, "host": json_text(beat.host) if beat.host else None,
            "heartbeat_time": beat.time, "step": beat.step, "step_time": beat.step_time,
            "phase": beat.phase, "hang_seconds": beat.hang_seconds,
            "hung_since": beat.hung_since,
            "stacks": json_text(stacks) if stacks else None,
            "score": scores.get(beat.worker),
        })
    return out


def error_to_json(error: ProducerError) -> dict[str, Any]:
    return {"producer": error.producer, "message": error.message, "since": error.since}


def index_to_json(snap: JobsSnapshot) -> dict[str, Any]:
    """`hosts`, `jobs`, `alerts`, `errors` and `problems` (the logdirs' own: a directory that
    cannot be listed, ...) of the document. Job names that would print alike: " #2"."""
    return {key: list(value) if isinstance(value, Iterator) else value
            for key, value in _index_parts(snap).items()}


def _index_parts(snap: JobsSnapshot) -> dict[str, Any]:
    """index_to_json's keys, `jobs` made one by one as it is read."""
    names = json_names(j.name for j in snap.jobs)
    prices = snapshot_prices(snap)
    return {
        "hosts": [host_to_json(h, snap.generated_at) for h in snap.hosts],
        "jobs": (job_to_json(j, names[j.name], prices) for j in snap.jobs),
        "alerts": [
            {**a.to_json(), "run": json_text(a.run) if a.run else a.run,
             "host": json_text(a.host) if a.host else a.host}
            for a in snap.alerts
        ],
        "errors": [error_to_json(e) for e in snap.errors],
        "problems": [json_text(p) for p in snap.problems],
    }


def document(snap: JobsSnapshot) -> dict[str, Any]:
    """The whole document, keys in their published order; `runs` and `jobs` are iterators
    that make each element as it is read, for distcore.jsonout.write to write one by one."""
    from distcore.events.jsonify import iter_runs_json  # the reader's protos: when printing

    telemetry = snap.local_telemetry
    gpus, host = telemetry_to_json(telemetry) if telemetry is not None else ({}, None)
    parts = _index_parts(snap)
    return {
        "version": SNAPSHOT_VERSION,
        "generated_at": snap.generated_at,
        "logdirs": list(snap.logdirs),
        "runs": iter_runs_json([run for job in snap.jobs for run in job.parts.values()]),
        "gpus": gpus,
        "host": host,
        "alerts": parts.pop("alerts"),
        **parts,
    }


def to_json(snap: JobsSnapshot) -> dict[str, Any]:
    """The whole document, built whole."""
    return {key: list(value) if isinstance(value, Iterator) else value
            for key, value in document(snap).items()}

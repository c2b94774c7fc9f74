"""Hosts: this machine's sampler snapshot, and each `system/` run's latest samples.

distagent's recorder (distagent.system_record) writes `gpu/<i>/<field>` and `host/...` scalars
into `<job>/system/` (or `system/worker-<i>/` per worker), with the hparams `host` and `worker`
where the agent records them. The newest point of each tag is that host's latest figure.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from distcore import names
from distcore.bounded import system_value
from distcore.events.snapshots import RunSnapshot
from distcore.jobs.parts import worker_of
from distcore.jobs.snapshots import Host
from distcore.telemetry.samples import GpuDevice, TelemetrySnapshot
from distcore.textsafe import terminal_text

_GPU_TAG = re.compile(r"gpu/(\d{1,4})/([a-z_]+)")
# names.GPU_FIELDS and GPM_FIELDS -> GpuDevice attribute (what the recorder writes).
_GPU_ATTRS: Final = {
    "utilization": "utilization_gpu",
    "memory_used_mib": "memory_used_mib",
    "power_w": "power_w",
    "temperature_c": "temperature_c",
    **{field: field for field in names.GPM_FIELDS},
}
STALE_INTERVALS: Final = 3.0  # a host is stale after this many of its sample intervals
DEFAULT_INTERVAL: Final = 5.0  # the recorder's default, for a host with too few samples yet
LOCAL_KEY: Final = "local"


def _device(index: int, values: Mapping[str, float | None]) -> GpuDevice:
    fields: dict[str, Any] = dict.fromkeys(_GPU_ATTRS.values())
    fields.update(values)
    return GpuDevice(
        index=index,
        name=None,
        uuid=None,
        utilization_memory=None,
        memory_total_mib=None,
        power_limit_w=None,
        sm_clock_mhz=None,
        fan_percent=None,
        pcie_rx_kib_s=None,
        pcie_tx_kib_s=None,
        processes=(),
        **fields,
    )


def _int_hparam(hparams: Mapping[str, Any], key: str) -> int | None:
    value = hparams.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and float(value).is_integer():
        return int(value)
    if isinstance(value, str) and value.isdigit() and len(value) < 7:
        return int(value)
    return None


def _cadence(run: RunSnapshot) -> float | None:
    """Seconds between samples, from the densest series' kept points."""
    best = max(run.scalars.values(), key=lambda s: s.count, default=None)
    if best is None or len(best.wall_times) < 2:
        return None
    span = best.wall_times[-1] - best.wall_times[0]
    return span / (len(best.wall_times) - 1) if span > 0 else None


def _last(tag: str, series: Any) -> float | None:
    return system_value(tag, series.last_value) if series is not None else None


def host_from_system_run(job: str, part: str, run: RunSnapshot) -> Host:
    """One worker's (or the job's single) host, from the newest point of each tag."""
    gpus: dict[int, dict[str, float | None]] = {}
    for tag, series in run.scalars.items():
        match = _GPU_TAG.fullmatch(tag)
        if match and match.group(2) in _GPU_ATTRS:
            field, value = match.group(2), series.last_value
            gpus.setdefault(int(match.group(1)), {})[_GPU_ATTRS[field]] = system_value(field, value)
    cpu = run.scalars.get(names.HOST_CPU_PERCENT)
    mem = run.scalars.get(names.HOST_MEMORY_USED_MIB)
    worker = _int_hparam(run.hparams, "worker")
    worker = worker if worker is not None else worker_of(part)
    host_name = run.hparams.get("host")
    label = f"{job} worker {worker}" if worker is not None else f"{job} {part}"
    return Host(
        key=f"logdir:{job}/{part}",
        name=host_name if isinstance(host_name, str) and host_name else label,
        source="logdir",
        worker=worker,
        job=job,
        sampled_at=run.last_update,
        gpus=tuple(_device(i, gpus[i]) for i in sorted(gpus)),
        # The recorder writes how many GPUs it simulated (absent for real ones).
        simulated=bool(run.hparams.get("simulated_gpus")),
        cpu_percent=_last(names.HOST_CPU_PERCENT, cpu),
        memory_used_mib=_last(names.HOST_MEMORY_USED_MIB, mem),
        interval_seconds=_cadence(run),
        machine=host_name if isinstance(host_name, str) and host_name else None,
    )


def local_host(snap: TelemetrySnapshot | None, interval: float | None) -> Host:
    """This machine, from the sampler's latest snapshot (None: not sampled yet)."""
    name = socket.gethostname() or "localhost"
    if snap is None:
        return Host(LOCAL_KEY, name, "local", gpu_reason="sampling…", interval_seconds=interval)
    host = snap.host
    return Host(
        key=LOCAL_KEY,
        name=name,
        source="local",
        sampled_at=snap.time,
        gpus=snap.devices,
        gpu_reason=snap.status.reason,
        gpm_reason=snap.status.gpm_reason,
        simulated=snap.status.simulated,
        cpu_percent=host.cpu_percent if host is not None else None,
        memory_used_mib=host.memory_used_mib if host is not None else None,
        memory_total_mib=host.memory_total_mib if host is not None else None,
        interval_seconds=interval,
        cpu_cores=len(host.per_core) if host is not None and host.per_core else None,
        load_avg_1m=host.load_avg[0] if host is not None and host.load_avg else None,
        machine=name,
    )


def local_history(
    history: Callable[[str], tuple[float | None, ...]], host: Host
) -> Mapping[str, tuple[float | None, ...]]:
    """The sampler's kept values (oldest first) of every metric of this machine's GPUs and
    host, by their names in distcore.names: what its sparklines draw, carried in the snapshot
    so the front ends never read the live sampler."""
    fields = names.GPU_FIELDS + names.GPM_FIELDS
    keys = [names.gpu_tag(g.index, f) for g in host.gpus for f in fields]
    keys += [names.HOST_CPU_PERCENT, names.HOST_MEMORY_USED_MIB]
    found = {key: history(key) for key in keys}
    return {key: values for key, values in found.items() if values}


def on_this_machine(hosts: Sequence[Host]) -> tuple[tuple[Host, ...], tuple[Host, ...]]:
    """(the hosts shown, the workers folded into this machine's own entry).

    A job's worker that recorded this machine's name (and, like it, real or simulated GPUs,
    or none) ran here: the local sampler already shows every GPU of this machine, live, so
    listing the worker's recorded copy again showed one machine two or three times. Workers on other
    machines are never merged with each other: two workers of one host may each see only
    their own GPUs (CUDA_VISIBLE_DEVICES), all called GPU 0.
    """
    local = next((h for h in hosts if h.source == "local"), None)
    if local is None or local.machine is None:
        return tuple(hosts), ()
    folded = tuple(h for h in hosts if h.source == "logdir" and h.machine == local.machine
                   and (h.simulated == local.simulated or not h.gpus))
    keys = {h.key for h in folded}
    return tuple(h for h in hosts if h.key not in keys), folded


def also_here(workers: Sequence[Host]) -> str:
    """`also here: job a worker 0, job b`: the jobs' workers folded into this machine's entry
    (on_this_machine), escaped: its GPUs are theirs."""
    names = []
    for host in workers:
        label = f"job {terminal_text(host.job or '?', 30)}"
        names.append(f"{label} worker {host.worker}" if host.worker is not None else label)
    return "also here: " + ", ".join(names)


def host_context(host: Host) -> tuple[str, ...]:
    """What a host's heading says beside its name, escaped: its worker and its job. A worker
    that recorded no host name is already called "<job> worker <i>" (or "<job> <part>"), so
    it adds nothing; otherwise two jobs' samples from one host would read alike."""
    if host.source == "logdir" and host.machine is None:
        return ()
    worker = (f"worker {host.worker}",) if host.worker is not None else ()
    job = (f"job {terminal_text(host.job, 30)}",) if host.job is not None else ()
    return worker + job


def host_age(host: Host, now: float) -> float | None:
    return None if host.sampled_at is None else max(0.0, now - host.sampled_at)


def is_stale(host: Host, now: float) -> bool:
    """Older than a few of its own sample intervals (at least 15 s: a loaded machine lags)."""
    age = host_age(host, now)
    interval = host.interval_seconds or DEFAULT_INTERVAL
    return age is not None and age > max(STALE_INTERVALS * interval, 15.0)

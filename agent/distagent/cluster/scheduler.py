"""Which scheduler started this process, for run.json, and the ports a Slurm step's tasks use.

Pure functions of the environment (no TensorFlow). run.json's `scheduler` says where to look
for the job outside the logdir: Slurm's job and step ids, node list and partition, or the pod
where Kubernetes runs it; distmon reads it back (distcore.jobs.scheduler) and asks the scheduler
what became of the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

SLURM_PORT_FIRST: Final = 12000
"""The lowest port a Slurm task listens on; all stay below Linux's ephemeral range (32768)."""
SLURM_PORT_STRIDE: Final = 16
"""Ports set aside per step on each node: one per task, up to this many tasks per node."""
SLURM_PORT_SLOTS: Final = 1024
SLURM_STEPS_PER_JOB: Final = 8
"""Steps of one job with distinct ports; consecutive job ids never share a slot."""

_SLURM_FIELDS: Final = (
    ("job_id", "SLURM_JOB_ID"),
    ("step_id", "SLURM_STEP_ID"),
    ("array_job_id", "SLURM_ARRAY_JOB_ID"),
    ("array_task_id", "SLURM_ARRAY_TASK_ID"),
    ("job_name", "SLURM_JOB_NAME"),
    ("node_list", "SLURM_JOB_NODELIST"),
    ("step_node_list", "SLURM_STEP_NODELIST"),
    ("partition", "SLURM_JOB_PARTITION"),
    ("cluster", "SLURM_CLUSTER_NAME"),
    ("restart_count", "SLURM_RESTART_COUNT"),
    ("node", "SLURMD_NODENAME"),
)


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().isdigit() else None


def scheduler_info(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """run.json's `scheduler`: {"kind": "slurm", "job_id": ..., ...} or {"kind": "kubernetes",
    "pod": ...}, or None when no scheduler is seen. Slurm wins: a Slurm job on Kubernetes
    nodes is a Slurm job."""
    if environ.get("SLURM_JOB_ID"):
        info: dict[str, Any] = {"kind": "slurm"}
        for key, name in _SLURM_FIELDS:
            value = environ.get(name)
            if value:
                info[key] = value
        # Outside srun the batch script runs in the job's "batch" step.
        info.setdefault("step_id", "batch")
        return info
    if environ.get("KUBERNETES_SERVICE_HOST"):
        info = {"kind": "kubernetes"}
        pod = environ.get("POD_NAME") or environ.get("HOSTNAME")
        if pod:
            info["pod"] = pod
        if environ.get("POD_NAMESPACE"):
            info["namespace"] = environ["POD_NAMESPACE"]
        return info
    return None


def slurm_port_base(environ: Mapping[str, str], tasks_per_node: int = 1) -> int:
    """The first port of this step's tasks on each node, derived from the job and step ids.

    Every task of a step computes the same base without talking to the others, and two jobs
    sharing a node get different ones (job ids 1 apart are `SLURM_STEPS_PER_JOB` slots apart;
    they meet again only `SLURM_PORT_SLOTS / SLURM_STEPS_PER_JOB` jobs later). Tasks take
    base, base + 1, ... on their node, as TensorFlow's SlurmClusterResolver assigns them; a
    step with more tasks per node than `SLURM_PORT_STRIDE` takes wider (so fewer) slots.
    """
    job = _int(environ.get("SLURM_JOB_ID")) or 0
    step = _int(environ.get("SLURM_STEP_ID")) or 0
    stride = SLURM_PORT_STRIDE * max(1, -(-tasks_per_node // SLURM_PORT_STRIDE))
    slots = max(1, SLURM_PORT_SLOTS * SLURM_PORT_STRIDE // stride)
    slot = (job * SLURM_STEPS_PER_JOB + step % SLURM_STEPS_PER_JOB) % slots
    return SLURM_PORT_FIRST + slot * stride


def in_slurm_batch_script(environ: Mapping[str, str]) -> bool:
    """Inside a Slurm allocation (sbatch's script, salloc's shell) but not inside `srun`."""
    return bool(environ.get("SLURM_JOB_ID")) and "SLURM_STEP_NUM_TASKS" not in environ

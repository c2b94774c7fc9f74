"""What distagent takes from Slurm's (or Kubernetes') environment: run.json's `scheduler`, each
step's ports, and the one line for a batch script that runs a multi-worker job outside srun.

Pure (no TensorFlow, no Slurm): tables of the environments Slurm 22.05 sets (captured from the
suite's own cluster); tests/agent/test_slurm.py runs the real thing.
"""

from __future__ import annotations

import itertools
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distagent.cluster.layout import ClusterError, layout_from_workers, resolve_layout
from distagent.cluster.scheduler import (
    SLURM_PORT_FIRST,
    SLURM_PORT_STRIDE,
    SLURM_STEPS_PER_JOB,
    in_slurm_batch_script,
    scheduler_info,
    slurm_port_base,
)
from distagent.cluster.strategy import refuse_busy_port
from distagent.train.rundir import process_identity
from tests.kit.slurm import JOB_BLOCKS, claim_block, job_ids

SRUN_TASK = {  # srun -n 2 inside job 7, as slurmd set it for task 1
    "SLURM_JOB_ID": "7", "SLURM_JOBID": "7", "SLURM_STEP_ID": "0", "SLURM_STEPID": "0",
    "SLURM_JOB_NAME": "distagent", "SLURM_JOB_NODELIST": "vm", "SLURM_STEP_NODELIST": "vm",
    "SLURM_JOB_PARTITION": "debug", "SLURM_CLUSTER_NAME": "distmon-test",
    "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_PROCID": "1",
    "SLURMD_NODENAME": "vm",
}
BATCH = {"SLURM_JOB_ID": "8", "SLURM_JOB_NODELIST": "vm", "SLURM_JOB_PARTITION": "debug",
         "SLURM_RESTART_COUNT": "1", "SLURM_NTASKS": "2"}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (SRUN_TASK, {"kind": "slurm", "job_id": "7", "step_id": "0", "job_name": "distagent",
                     "node_list": "vm", "step_node_list": "vm", "partition": "debug",
                     "cluster": "distmon-test", "node": "vm"}),
        (BATCH, {"kind": "slurm", "job_id": "8", "step_id": "batch", "node_list": "vm",
                 "partition": "debug", "restart_count": "1"}),
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "trainer-worker-0"},
         {"kind": "kubernetes", "pod": "trainer-worker-0"}),
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "h", "POD_NAME": "p",
          "POD_NAMESPACE": "ml"}, {"kind": "kubernetes", "pod": "p", "namespace": "ml"}),
        ({**BATCH, "KUBERNETES_SERVICE_HOST": "10.0.0.1"},
         {"kind": "slurm", "job_id": "8", "step_id": "batch", "node_list": "vm",
          "partition": "debug", "restart_count": "1"}),
        ({"HOSTNAME": "laptop"}, None),
    ],
)
def test_scheduler_info(environ: dict[str, str], expected: dict[str, str] | None) -> None:
    assert scheduler_info(environ) == expected


def test_run_json_identity_names_the_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in SRUN_TASK.items():
        monkeypatch.setenv(key, value)
    assert process_identity()["scheduler"]["job_id"] == "7"
    for key in SRUN_TASK:
        monkeypatch.delenv(key)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert process_identity()["scheduler"] is None


@given(job=st.integers(1, 10**9), step=st.integers(0, SLURM_STEPS_PER_JOB - 1))
def test_ports_are_derived_from_job_and_step(job: int, step: int) -> None:
    env = {"SLURM_JOB_ID": str(job), "SLURM_STEP_ID": str(step)}
    base = slurm_port_base(env)
    assert base == slurm_port_base(dict(env))  # every task of the step agrees
    assert base >= SLURM_PORT_FIRST and base + SLURM_PORT_STRIDE <= 32768  # below ephemeral
    neighbours = [{"SLURM_JOB_ID": str(job + 1), "SLURM_STEP_ID": str(step)},
                  {"SLURM_JOB_ID": str(job), "SLURM_STEP_ID": str((step + 1) % 8)}]
    for other in neighbours:  # the next job, the next step: a range of their own
        assert abs(slurm_port_base(other) - base) >= SLURM_PORT_STRIDE


@pytest.mark.parametrize("tasks", [1, 16, 17, 64, 300])
def test_many_tasks_per_node_get_wider_ranges(tasks: int) -> None:
    bases = {slurm_port_base({"SLURM_JOB_ID": str(j)}, tasks) for j in range(1, 20)}
    assert len(bases) == 19  # consecutive jobs still apart
    for base in bases:
        assert base >= SLURM_PORT_FIRST and base + tasks <= 32768
    ordered = sorted(bases)
    assert min(b - a for a, b in itertools.pairwise(ordered)) >= tasks


def test_tensorflow_default_port_is_not_every_jobs() -> None:
    assert slurm_port_base({"SLURM_JOB_ID": "1"}) != slurm_port_base({"SLURM_JOB_ID": "2"})
    assert slurm_port_base({}) == SLURM_PORT_FIRST  # no ids: still a fixed, valid base


def test_batch_script_outside_srun_is_one_line() -> None:
    assert in_slurm_batch_script(BATCH) and not in_slurm_batch_script(SRUN_TASK)
    with pytest.raises(ClusterError) as err:
        resolve_layout((), None, BATCH)
    message = str(err.value)
    assert message.startswith("Slurm job 8: this is the batch script, not a job step")
    assert "srun distagent start" in message and "\n" not in message
    assert "TF_CONFIG" not in message and "--task-index" not in message


def test_a_taken_port_is_refused_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        layout = layout_from_workers([f"127.0.0.1:{port}", "127.0.0.1:1"], 0)
        with pytest.raises(ClusterError, match=f"port {port} on this host is in use"):
            refuse_busy_port(layout)
    refuse_busy_port(layout)  # free again once the other listener is gone


def block_ports(block: int) -> set[int]:
    """Every port a step of a job numbered in `block` may take (all its steps, all tasks)."""
    return {slurm_port_base({"SLURM_JOB_ID": str(job), "SLURM_STEP_ID": str(step)}) + task
            for job in job_ids(block) for step in range(SLURM_STEPS_PER_JOB)
            for task in range(SLURM_PORT_STRIDE)}


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(range(JOB_BLOCKS), 2)))
def test_test_clusters_at_once_never_share_a_workers_port(a: int, b: int) -> None:
    assert len(job_ids(a)) >= 16  # room for a module's jobs
    assert not block_ports(a) & block_ports(b)


def test_a_block_is_held_until_its_lock_is_closed() -> None:
    first, lock = claim_block(timeout=5.0)
    try:
        second, other = claim_block(timeout=5.0)
        other.close()
        assert second != first
    finally:
        lock.close()

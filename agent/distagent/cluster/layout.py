"""Who is in the cluster and who this process is: from TF_CONFIG, Slurm, or `[cluster] workers`.

Pure: no TensorFlow here (Slurm's resolver is imported inside `layout_from_slurm`), so the rules
are tested as tables and `distagent --help` stays fast. The result, `ClusterLayout`, is what
TensorFlow's `TF_CONFIG` says, whichever source it came from: `tf_config()` gives the JSON that
is put into the environment before the strategy is created.

Precedence: `--task-index` (with `[cluster] workers`) is the most explicit and wins; then
`TF_CONFIG` (Kubernetes operators, Ray and most launchers set it); then Slurm, when the process
runs inside an `srun` step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from distagent.cluster.scheduler import in_slurm_batch_script, slurm_port_base
from distcore.errors import DistmonError

ClusterSource = Literal["config", "tf_config", "slurm"]
# MultiWorkerMirroredStrategy trains on these; evaluator and ps tasks are other strategies' jobs.
TRAINING_JOBS = ("chief", "worker")


class ClusterError(DistmonError):
    """The cluster description is missing or wrong (exit 2, one line)."""


@dataclass(frozen=True)
class Task:
    rank: int
    """Position in the cluster: the chief (if any) first, then the workers in order."""
    task_type: str
    index: int
    address: str

    @property
    def name(self) -> str:
        """TensorFlow's name for the task, as its errors print it."""
        return f"/job:{self.task_type}/replica:0/task:{self.index}"

    def describe(self) -> str:
        return f"worker {self.rank} ({self.task_type}:{self.index} at {self.address})"


@dataclass(frozen=True)
class ClusterLayout:
    jobs: tuple[tuple[str, tuple[str, ...]], ...]
    """(job name, addresses) for the training jobs, chief first."""
    task_type: str
    task_index: int
    source: ClusterSource

    @property
    def tasks(self) -> tuple[Task, ...]:
        flat = [(job, i, a) for job, addresses in self.jobs for i, a in enumerate(addresses)]
        return tuple(Task(rank, job, i, a) for rank, (job, i, a) in enumerate(flat))

    @property
    def me(self) -> Task:
        return next(t for t in self.tasks
                    if (t.task_type, t.index) == (self.task_type, self.task_index))

    @property
    def rank(self) -> int:
        return self.me.rank

    @property
    def num_workers(self) -> int:
        return len(self.tasks)

    @property
    def hosts(self) -> int:
        """Distinct machines among the tasks, by the host part of their addresses (launch-local's
        workers all listen on 127.0.0.1: one host)."""
        return len({t.address.rpartition(":")[0] or t.address for t in self.tasks})

    @property
    def is_chief(self) -> bool:
        """TensorFlow's rule: the chief task if there is one, else worker 0."""
        return self.rank == 0

    def peers(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.rank != self.rank)

    def tf_config(self) -> str:
        cluster = {job: list(addresses) for job, addresses in self.jobs}
        task = {"type": self.task_type, "index": self.task_index}
        return json.dumps({"cluster": cluster, "task": task})


def _checked(jobs: Mapping[str, Sequence[str]], task_type: str, task_index: int,
             source: ClusterSource, where: str) -> ClusterLayout:
    ordered = tuple((j, tuple(jobs[j])) for j in TRAINING_JOBS if jobs.get(j))
    if not ordered:
        raise ClusterError(f"{where}: no chief or worker tasks in the cluster")
    if len(dict(ordered).get("chief", ())) > 1:
        raise ClusterError(f"{where}: at most one chief task, got {len(dict(ordered)['chief'])}")
    addresses = [a for _, group in ordered for a in group]
    bad = [a for a in addresses if not _is_host_port(a)]
    if bad:
        got = ", ".join(map(repr, bad))
        raise ClusterError(f"{where}: expected host:port addresses, got {got}")
    if len(set(addresses)) != len(addresses):
        raise ClusterError(f"{where}: the same host:port appears twice")
    size = len(dict(ordered).get(task_type, ()))
    if task_type not in TRAINING_JOBS or not 0 <= task_index < size:
        raise ClusterError(
            f"{where}: this task is {task_type}:{task_index}, which is not in the cluster "
            f"({', '.join(f'{j}: {len(a)}' for j, a in ordered)})"
        )
    return ClusterLayout(ordered, task_type, task_index, source)


def _is_host_port(address: str) -> bool:
    host, sep, port = address.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536)


def layout_from_workers(workers: Sequence[str], task_index: int) -> ClusterLayout:
    """`[cluster] workers` plus `--task-index`: worker i is the i-th address; worker 0 is chief."""
    return _checked({"worker": workers}, "worker", task_index, "config", "cluster.workers")


def layout_from_tf_config(text: str) -> ClusterLayout:
    try:
        data = json.loads(text)
        cluster, task = data["cluster"], data["task"]
        task_type, task_index = str(task["type"]), int(task["index"])
    except (ValueError, KeyError, TypeError) as err:
        raise ClusterError(
            'TF_CONFIG: expected JSON like {"cluster": {"worker": ["host:port", ...]}, '
            '"task": {"type": "worker", "index": 0}} '
            f"({type(err).__name__}: {err})"
        ) from None
    if not isinstance(cluster, dict):
        raise ClusterError("TF_CONFIG: cluster must be an object of job name -> addresses")
    others = sorted(set(cluster) - set(TRAINING_JOBS))
    if task_type in others:
        raise ClusterError(
            f"TF_CONFIG: task type {task_type!r} does not train with MultiWorkerMirroredStrategy "
            "(only chief and worker tasks do)"
        )
    return _checked(cluster, task_type, task_index, "tf_config", "TF_CONFIG")


def in_slurm_step(environ: Mapping[str, str]) -> bool:
    """Inside `srun` (a job step), not just inside an allocation's batch script."""
    return "SLURM_PROCID" in environ and "SLURM_STEP_NUM_TASKS" in environ


def _slurm_gpus_per_node(environ: Mapping[str, str], tasks_per_node: int) -> tuple[int, int, bool]:
    """(gpus_per_node, gpus_per_task, auto_set_gpu) for TensorFlow's SlurmClusterResolver.

    The resolver packs tasks onto a node by GPU slots and asks nvidia-smi when it is not told.
    On CPU nodes it would find no slot at all, so each task gets a notional slot and the
    resolver is told not to touch CUDA_VISIBLE_DEVICES.
    """
    gpus = environ.get("SLURM_GPUS_ON_NODE")
    if gpus and gpus.isdigit() and int(gpus) > 0:
        return int(gpus), max(1, int(gpus) // tasks_per_node), True
    return tasks_per_node, 1, False


def layout_from_slurm(environ: Mapping[str, str], *, port_base: int | None = None
                      ) -> ClusterLayout:
    """The cluster of this `srun` step, through TensorFlow's own SlurmClusterResolver.

    The resolver reads SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST and
    SLURM_STEP_TASKS_PER_NODE from `os.environ`; `environ` must be that environment. Ports
    start at `port_base`, by default derived from the job and step ids (TensorFlow's own
    default, 8888 for every job, makes two jobs on one node collide).
    """
    from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as slurm

    try:
        per_node = slurm.expand_tasks_per_node(environ["SLURM_STEP_TASKS_PER_NODE"])
        gpus_per_node, gpus_per_task, auto_gpu = _slurm_gpus_per_node(environ, max(per_node))
        base = slurm_port_base(environ, max(per_node)) if port_base is None else port_base
        resolver = slurm.SlurmClusterResolver(
            port_base=base, gpus_per_node=gpus_per_node, gpus_per_task=gpus_per_task,
            auto_set_gpu=auto_gpu,
        )
        spec = resolver.cluster_spec().as_dict()
    except (KeyError, ValueError, RuntimeError) as err:
        raise ClusterError(f"Slurm: cannot resolve the cluster of this step: {err}") from None
    task_type, task_id = resolver.get_task_info()
    return _checked(spec, str(task_type), int(task_id), "slurm", "Slurm")


def resolve_layout(workers: Sequence[str], task_index: int | None,
                   environ: Mapping[str, str]) -> ClusterLayout:
    """The cluster from the most explicit source that is there (see the module's docstring)."""
    if task_index is not None:
        if not workers:
            raise ClusterError(
                "--task-index needs [cluster] workers = [\"host:port\", ...] in the config "
                "(or leave it out and set TF_CONFIG, or run under srun)"
            )
        return layout_from_workers(workers, task_index)
    if environ.get("TF_CONFIG"):
        return layout_from_tf_config(environ["TF_CONFIG"])
    if in_slurm_step(environ):
        return layout_from_slurm(environ)
    if in_slurm_batch_script(environ):
        raise ClusterError(
            f"Slurm job {environ['SLURM_JOB_ID']}: this is the batch script, not a job step: "
            "start the workers with `srun distagent start ...` (one per task)"
        )
    if workers:
        raise ClusterError(
            "[cluster] workers is set: start each worker with --task-index I "
            "(or use `distagent launch-local CONFIG --workers N` on one machine)"
        )
    raise ClusterError(
        'strategy.kind = "multi_worker" needs a cluster: set TF_CONFIG, run under srun, or '
        "list [cluster] workers and pass --task-index"
    )


def plan_layout(workers: Sequence[str], environ: Mapping[str, str]) -> ClusterLayout:
    """The cluster `distagent plan` describes: resolve_layout's sources without a task index
    (a plan is the same from every worker), `[cluster] workers` read as worker 0's view."""
    if environ.get("TF_CONFIG") or in_slurm_step(environ):
        return resolve_layout(workers, None, environ)
    if workers:
        return layout_from_workers(workers, 0)
    if in_slurm_batch_script(environ):
        return resolve_layout(workers, None, environ)  # its error: plan under srun
    raise ClusterError(
        'strategy.kind = "multi_worker": the plan needs the cluster: set TF_CONFIG, run it '
        "under srun, or list [cluster] workers"
    )

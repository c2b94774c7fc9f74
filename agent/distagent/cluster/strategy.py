"""MultiWorkerMirroredStrategy for a resolved cluster, with a timeout that ends in a clear error.

TensorFlow reads the cluster from `TF_CONFIG` when the strategy is created, and the strategy must
come before any other TensorFlow op in the process (it starts this process's gRPC server), so
`create_cluster_setup` writes `TF_CONFIG` and creates the strategy first thing.

A lost peer is found by the coordination service (TensorFlow's heartbeats between workers,
`[cluster] timeout_seconds`): a worker missing from the start, or one whose heartbeats stop,
fails the others within that time, and the service aborts their blocked collectives. The
collectives themselves carry no timeout: with one, TensorFlow (2.21) keeps about 4 threads per
step per worker that it never releases, until thread creation fails and the worker aborts (a
fast two-worker job did at ~3,900 steps; without it a worker holds ~120 threads throughout).

Each collective keeps the instance key it was traced with (see `reuse_instance_keys`): by default
TensorFlow draws a fresh key at every call and its runtime keeps a record of each key for the
life of the process: ~3 KiB of native memory per step in a two-worker job.
"""

from __future__ import annotations

import faulthandler
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from distagent.cluster.faults import explain_startup_failure
from distagent.cluster.layout import (
    TRAINING_JOBS,
    ClusterError,
    ClusterLayout,
    plan_layout,
    resolve_layout,
)
from distagent.schema import ClusterConfig, StrategyConfig
from distagent.strategy_setup import StrategySetup
from distcore.wording import counted


@dataclass(frozen=True)
class ClusterSetup:
    strategy: Any
    task_type: str
    task_index: int
    num_workers: int
    is_chief: bool
    devices_per_worker: int
    layout: ClusterLayout
    timeout_seconds: float

    @property
    def rank(self) -> int:
        """This worker's position in the cluster (names system/worker-<rank>)."""
        return self.layout.rank

    def strategy_setup(self) -> StrategySetup:
        devices = tuple(self.strategy.extended.worker_devices)
        return StrategySetup(
            strategy=self.strategy,
            devices=devices,
            replicas=int(self.strategy.num_replicas_in_sync),
            workers=self.num_workers,
            task_index=self.rank,
            hosts=self.layout.hosts,
        )


@dataclass
class ClusterRequest:
    """`run_job`'s `cluster` for `distagent start`; resolved when the strategy is made."""

    config: ClusterConfig
    task_index: int | None = None
    environ: MutableMapping[str, str] = field(default_factory=lambda: os.environ)
    setup: ClusterSetup | None = None

    @property
    def is_chief(self) -> bool:
        return self.setup.is_chief if self.setup is not None else False

    def resolve(self) -> ClusterSetup:
        if self.setup is None:
            layout = resolve_layout(self.config.workers, self.task_index, self.environ)
            self.setup = create_cluster_setup(
                layout, timeout_seconds=self.config.timeout_seconds, environ=self.environ
            )
        return self.setup


def _configure_coordination(layout: ClusterLayout, timeout_seconds: float) -> None:
    """TensorFlow's coordination service as the strategy would set it up, plus our timeouts.

    The strategy configures the service only when nothing has (it checks first), so doing it
    here is how the register and heartbeat timeouts get in.
    """
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    spec = multi_worker_util.normalize_cluster_spec({j: list(a) for j, a in layout.jobs})
    millis = int(timeout_seconds * 1000)
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(spec),
        cluster_register_timeout_in_ms=millis,
        heartbeat_timeout_in_ms=millis,
        coordinated_jobs=[
            coordination_config_pb2.CoordinatedJob(name=job, num_tasks=len(addresses))
            for job, addresses in layout.jobs if job in TRAINING_JOBS
        ],
    )


UNIQUE_KEY_SWITCH = "_prefer_unique_instance_key"


def reuse_instance_keys() -> None:
    """Collectives inside a tf.function keep the instance key drawn when it was traced.

    TensorFlow (2.21) feeds each compiled collective a new instance key at every call, and the
    collective runtime keeps every key's parameters for the life of the process: a fast
    two-worker job's RSS grew ~2.8 KiB per step, a bare-TensorFlow loop's ~3.3, with the Python
    heap flat (bench/agent_soak.py, docs/benchmarks.md). With keys drawn at tracing, a step
    reuses its keys and memory holds flat. That needs every worker to trace the same functions
    in the same order, which the training loop does: its calls (and so its traces) follow the
    step and the boundaries, which every worker shares. A fresh key per call is what a
    per-collective timeout cancels by, and the agent sets none (see the module's docstring).
    """
    from tensorflow.python.distribute import cross_device_utils

    launcher = cross_device_utils.CollectiveReplicaLauncher
    if not hasattr(launcher, UNIQUE_KEY_SWITCH):  # a TensorFlow that renamed its private switch
        print(f"distagent: this TensorFlow has no {launcher.__name__}.{UNIQUE_KEY_SWITCH}: each"
              " worker's memory may grow ~3 KiB per step (bench/agent_soak.py measures it)",
              file=sys.stderr)
        return
    setattr(launcher, UNIQUE_KEY_SWITCH, False)


JOIN_MIN_SECONDS = 120.0
"""Workers start at different times (image pulls, queues, TensorFlow's import): give them this
long at least to join, even when the timeout for a lost peer is shorter."""


class JoinWatchdog:
    """Ends the process, naming the missing workers, when joining the cluster takes too long.

    Creating the strategy waits inside TensorFlow until every worker has connected, and in
    TensorFlow 2.21 that wait has no deadline (the coordination service's register timeout did
    not end it in our runs); the call cannot be interrupted from Python, so after the timeout
    this thread prints one line naming the missing workers and exits with code 1 (or, when the
    wait holds the GIL, faulthandler's timer exits with code 1 after the line printed on entry).
    Nothing has been written yet then.
    """

    def __init__(self, layout: ClusterLayout, timeout_seconds: float,
                 exit_process: Callable[[int], Any] = os._exit, hard_exit: bool = True) -> None:
        self.layout = layout
        self.timeout_seconds = timeout_seconds
        self._exit = exit_process
        self._hard_exit = hard_exit  # False in tests: faulthandler would end the test process
        self._joined = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="distagent-cluster-join",
                                        daemon=True)

    def _watch(self) -> None:
        if self._joined.wait(self.timeout_seconds):
            return
        error = explain_startup_failure(
            TimeoutError("the cluster did not form"), self.layout, self.timeout_seconds
        )
        print(f"distagent: {error}", file=sys.stderr, flush=True)
        self._exit(error.exit_code)

    def __enter__(self) -> JoinWatchdog:
        print(f"distagent: {self.layout.me.describe()}: joining {self.layout.num_workers} "
              f"workers (gives up after {self.timeout_seconds:g} s)", file=sys.stderr, flush=True)
        # The wait can hold the GIL, and then this thread never runs: faulthandler's timer is
        # a C thread that exits (code 1) regardless; its traceback goes to a scratch file.
        self._sink = tempfile.TemporaryFile()
        if self._hard_exit:
            faulthandler.dump_traceback_later(self.timeout_seconds + 1.0, exit=True,
                                              file=self._sink)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._hard_exit:
            faulthandler.cancel_dump_traceback_later()
        self._sink.close()
        self._joined.set()
        self._thread.join()


def refuse_busy_port(layout: ClusterLayout) -> None:
    """One line when this worker's port is taken (another job on this node, most often).

    TensorFlow's gRPC server sets SO_REUSEPORT, so a second server on a taken port may start
    and join the other job's cluster; a plain listener bind (SO_REUSEADDR only: a port left in
    TIME_WAIT by the previous session of this job is free) tells a live listener apart.
    """
    port = int(layout.me.address.rpartition(":")[2])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
            probe.listen(1)
        except OSError as err:
            raise ClusterError(
                f"{layout.me.describe()}: port {port} on this host is in use ({err.strerror}); "
                "another job's worker may hold it: stop that job or pick other addresses"
            ) from None


def create_cluster_setup(
    layout: ClusterLayout,
    *,
    timeout_seconds: float,
    environ: MutableMapping[str, str] | None = None,
) -> ClusterSetup:
    """Set TF_CONFIG for `layout`, then create the strategy (it waits for every worker)."""
    environ = os.environ if environ is None else environ
    refuse_busy_port(layout)
    environ["TF_CONFIG"] = layout.tf_config()
    import tensorflow as tf

    _configure_coordination(layout, timeout_seconds)
    reuse_instance_keys()
    with JoinWatchdog(layout, max(timeout_seconds, JOIN_MIN_SECONDS)):
        try:
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
        except (tf.errors.OpError, RuntimeError) as err:
            raise explain_startup_failure(err, layout, timeout_seconds) from None
    return ClusterSetup(
        strategy=strategy,
        task_type=layout.task_type,
        task_index=layout.task_index,
        num_workers=layout.num_workers,
        is_chief=layout.is_chief,
        devices_per_worker=len(strategy.extended.worker_devices),
        layout=layout,
        timeout_seconds=timeout_seconds,
    )


def resolve_multi_worker(cfg: StrategyConfig, cluster: Any) -> StrategySetup:
    """`distagent.devices.resolve_strategy`'s hand-off for `strategy.kind = "multi_worker"`.

    `cluster`: a ClusterRequest (from `distagent start`), a ready ClusterSetup, or None (the
    cluster then comes from TF_CONFIG or Slurm, with the default timeout).
    """
    del cfg  # devices per worker are this machine's GPUs, or its CPU; see docs/across_machines.md
    if isinstance(cluster, ClusterSetup):
        return cluster.strategy_setup()
    if cluster is None or isinstance(cluster, int):
        cluster = ClusterRequest(ClusterConfig(), task_index=cluster)
    if not isinstance(cluster, ClusterRequest):
        raise TypeError(f"multi_worker: unexpected cluster argument {cluster!r}")
    return cluster.resolve().strategy_setup()


def planned_setup(config: ClusterConfig, environ: Mapping[str, str]) -> StrategySetup:
    """A multi-worker job as `distagent plan` shows it, without joining the cluster (the
    strategy waits for every worker): the layout's workers, each with this machine's devices
    as MultiWorkerMirroredStrategy takes them (its GPUs, else one CPU)."""
    layout = plan_layout(config.workers, environ)
    import tensorflow as tf

    devices = tuple(d.name for d in tf.config.list_logical_devices("GPU"))
    devices = devices or (tf.config.list_logical_devices("CPU")[0].name,)
    workers = layout.num_workers
    note = (f"planned for {counted(workers, 'worker')} with this machine's "
            f"{counted(len(devices), 'device')} each; the plan does not join the cluster")
    return StrategySetup(None, devices, workers * len(devices), workers, layout.rank, (note,),
                         hosts=layout.hosts)


def environ_without_cluster(environ: Mapping[str, str]) -> dict[str, str]:
    """A child's environment with no inherited cluster (launch-local's workers get theirs)."""
    return {k: v for k, v in environ.items()
            if k != "TF_CONFIG" and not k.startswith(("SLURM_STEP", "SLURM_PROCID"))}

"""Cluster resolution (TF_CONFIG, Slurm, [cluster] workers), lost-worker messages, launch-local.

Fast: no worker processes here (test_multiworker.py starts real ones). Slurm resolution runs
TensorFlow's own SlurmClusterResolver on a realistic `srun` environment.
"""

from __future__ import annotations

import io
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from distagent.cluster.faults import explain, first_line, named_tasks
from distagent.cluster.layout import (
    ClusterError,
    ClusterLayout,
    in_slurm_step,
    layout_from_slurm,
    layout_from_tf_config,
    layout_from_workers,
    resolve_layout,
)
from distagent.cluster.scheduler import slurm_port_base
from distagent.cluster.strategy import (
    UNIQUE_KEY_SWITCH,
    environ_without_cluster,
    reuse_instance_keys,
)
from distagent.commands.launch_local import (
    Workers,
    describe_exit,
    free_ports,
    worker_command,
    worker_overrides,
)
from distagent.config import load_config

SAMPLES = Path(__file__).resolve().parents[2] / "sample_configs"
TWO = ["10.0.0.1:2222", "10.0.0.2:2222"]


def tf_config(cluster: dict[str, Any], task_type: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


@pytest.mark.parametrize(
    ("text", "rank", "num_workers", "is_chief", "address"),
    [
        (tf_config({"worker": TWO}, "worker", 0), 0, 2, True, TWO[0]),
        (tf_config({"worker": TWO}, "worker", 1), 1, 2, False, TWO[1]),
        # A chief comes first: it is rank 0 and the chief; workers follow it.
        (tf_config({"chief": ["c:1"], "worker": TWO}, "chief", 0), 0, 3, True, "c:1"),
        (tf_config({"chief": ["c:1"], "worker": TWO}, "worker", 0), 1, 3, False, TWO[0]),
        # An evaluator is not part of training: left out of the all-reduce group.
        (tf_config({"worker": TWO, "evaluator": ["e:1"]}, "worker", 1), 1, 2, False, TWO[1]),
    ],
)
def test_tf_config(text: str, rank: int, num_workers: int, is_chief: bool, address: str) -> None:
    layout = layout_from_tf_config(text)
    assert (layout.rank, layout.num_workers, layout.is_chief) == (rank, num_workers, is_chief)
    assert layout.me.address == address
    assert layout.source == "tf_config"
    # What goes back into the environment is TF_CONFIG for the training jobs.
    again = json.loads(layout.tf_config())
    assert again["task"] == json.loads(text)["task"]
    assert set(again["cluster"]) <= {"chief", "worker"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "expected JSON like"),
        (json.dumps({"cluster": {"worker": TWO}}), "expected JSON like"),
        (tf_config({"worker": TWO}, "worker", 2), "worker:2, which is not in the cluster"),
        (tf_config({"worker": TWO, "evaluator": ["e:1"]}, "evaluator", 0), "does not train"),
        (tf_config({"ps": ["p:1"]}, "ps", 0), "does not train"),
        (tf_config({"worker": ["nohost"]}, "worker", 0), "expected host:port"),
        (tf_config({"worker": [TWO[0], TWO[0]]}, "worker", 0), "appears twice"),
        (tf_config({"chief": ["a:1", "b:1"]}, "chief", 0), "at most one chief"),
    ],
)
def test_tf_config_errors(text: str, message: str) -> None:
    with pytest.raises(ClusterError, match=message) as err:
        layout_from_tf_config(text)
    assert str(err.value).startswith("TF_CONFIG: ")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("workers", "task_index", "environ", "source", "rank"),
    [
        # --task-index with [cluster] workers is the most explicit: it beats the environment.
        (TWO, 1, {"TF_CONFIG": tf_config({"worker": ["x:1"]}, "worker", 0)}, "config", 1),
        ((), None, {"TF_CONFIG": tf_config({"worker": TWO}, "worker", 1)}, "tf_config", 1),
        # TF_CONFIG before Slurm: a launcher inside an allocation sets it on purpose.
        ((), None, {"TF_CONFIG": tf_config({"worker": TWO}, "worker", 0), "SLURM_PROCID": "1",
                    "SLURM_STEP_NUM_TASKS": "2"}, "tf_config", 0),
    ],
)
def test_precedence(workers: list[str], task_index: int | None, environ: dict[str, str],
                    source: str, rank: int) -> None:
    layout = resolve_layout(workers, task_index, environ)
    assert (layout.source, layout.rank) == (source, rank)


@pytest.mark.parametrize(
    ("workers", "task_index", "environ", "message"),
    [
        ((), 0, {}, "--task-index needs \\[cluster\\] workers"),
        (TWO, None, {}, "start each worker with --task-index"),
        ((), None, {}, "needs a cluster: set TF_CONFIG, run under srun"),
        (TWO, 5, {}, "worker:5, which is not in the cluster"),
        (["h:0"], 0, {}, "expected host:port"),
    ],
)
def test_resolution_errors(workers: list[str], task_index: int | None, environ: dict[str, str],
                           message: str) -> None:
    with pytest.raises(ClusterError, match=message):
        resolve_layout(workers, task_index, environ)


def test_workers_layout_names_tasks_as_tensorflow_does() -> None:
    layout = layout_from_workers(TWO, 1)
    assert [t.name for t in layout.tasks] == ["/job:worker/replica:0/task:0",
                                              "/job:worker/replica:0/task:1"]
    assert [t.describe() for t in layout.peers()] == ["worker 0 (worker:0 at 10.0.0.1:2222)"]


SRUN = {  # srun -N 2 --ntasks-per-node 2, as Slurm sets it for the step's 4th task
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "node[01-02]",
    "SLURM_STEP_NODELIST": "node[01-02]",
    "SLURM_NTASKS": "4",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_TASKS_PER_NODE": "2(x2)",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURMD_NODENAME": "node02",
}


def _slurm_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **extra: str) -> None:
    for key in ("TF_CONFIG", "SLURM_GPUS_ON_NODE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in {**SRUN, **extra}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # restored after: the resolver may set it
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol, no nvidia-smi: none is needed


def test_slurm_step_on_cpu_nodes(tf: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    _slurm_env(monkeypatch, tmp_path)
    assert in_slurm_step(os.environ)
    layout = resolve_layout((), None, os.environ)
    assert layout.source == "slurm"
    base = slurm_port_base(SRUN)  # from the job id: not TensorFlow's 8888 for every job
    assert base != 8888
    assert [t.address for t in layout.tasks] == [
        f"node01:{base}", f"node01:{base + 1}", f"node02:{base}", f"node02:{base + 1}"]
    assert (layout.task_type, layout.task_index, layout.rank) == ("worker", 3, 3)
    assert not layout.is_chief
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""  # CPU nodes: left alone


def test_slurm_step_with_gpus(tf: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    _slurm_env(monkeypatch, tmp_path, SLURM_GPUS_ON_NODE="4", SLURM_PROCID="2")
    layout = layout_from_slurm(os.environ)
    assert (layout.rank, layout.me.address, layout.is_chief) == (
        2, f"node02:{slurm_port_base(SRUN)}", False)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"  # 2 GPUs per task, first task on node02


def test_slurm_uneven_tasks_per_node(tf: Any, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    import os

    _slurm_env(monkeypatch, tmp_path, SLURM_STEP_NODELIST="gpu-a,gpu-b",
               SLURM_STEP_TASKS_PER_NODE="2,1", SLURM_STEP_NUM_TASKS="3", SLURM_PROCID="0")
    layout = layout_from_slurm(os.environ)
    base = slurm_port_base(SRUN)
    assert [t.address for t in layout.tasks] == [f"gpu-a:{base}", f"gpu-a:{base + 1}",
                                                 f"gpu-b:{base}"]
    assert layout.is_chief


def test_slurm_batch_script_is_not_a_step() -> None:
    assert not in_slurm_step({"SLURM_JOB_ID": "1", "SLURM_PROCID": "0"})


def test_slurm_error_is_one_line(tf: Any, monkeypatch: pytest.MonkeyPatch,
                                 tmp_path: Path) -> None:
    import os

    _slurm_env(monkeypatch, tmp_path, SLURM_STEP_NUM_TASKS="8")  # more tasks than placed
    with pytest.raises(ClusterError, match=r"^Slurm: cannot resolve the cluster"):
        layout_from_slurm(os.environ)


# Messages TensorFlow 2.21 raised in the surviving worker (captured from real runs).
KILLED_WORKER_1 = (
    "Collective ops is aborted by: failed to connect to all addresses; last error: UNKNOWN: "
    "ipv4:127.0.0.1:56404: Failed to connect to remote host: Connection refused\n"
    "Additional GRPC error information from remote target /job:worker/replica:0/task:1 while "
    "calling /tensorflow.WorkerService/RecvBuf:\n"
    "The error could be from a previous operation. Restart your program to reset."
)
STOPPED_HEARTBEATS_1 = (
    "Collective ops is aborted by: Error reported from /job:worker/task:1: The following tasks "
    "are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"
    "The tasks have crashed."
)
KILLED_CHIEF = (
    "Collective ops is aborted by: recvmsg:Connection reset by peer\nAdditional GRPC error "
    "information from remote target /job:worker/replica:0/task:0 while calling "
    "/tensorflow.WorkerService/CompleteInstance:"
)


@pytest.mark.parametrize(
    ("message", "me", "lost"),
    [(KILLED_WORKER_1, 0, [1]), (STOPPED_HEARTBEATS_1, 0, [1]), (KILLED_CHIEF, 1, [0]),
     ("no task named here", 0, [])],
)
def test_named_tasks(message: str, me: int, lost: list[int]) -> None:
    layout = layout_from_workers(["127.0.0.1:1", "127.0.0.1:2"], me)
    assert [t.rank for t in named_tasks(message, layout)] == lost


def _listening() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def _layout_with_peer(peer_port: int, me_port: int) -> ClusterLayout:
    return layout_from_workers([f"127.0.0.1:{me_port}", f"127.0.0.1:{peer_port}"], 0)


def test_explain_names_the_worker_whose_port_is_closed() -> None:
    closed = free_ports(1)[0]
    with _listening() as me:
        mine = me.getsockname()[1]
        layout = _layout_with_peer(closed, mine)
        err = explain(RuntimeError("Collective ops is aborted by: Socket closed"), layout)
    assert err is not None and err.exit_code == 1
    assert str(err).startswith(f"worker 0 (worker:0 at 127.0.0.1:{mine}): lost "
                               f"worker 1 (worker:1 at 127.0.0.1:{closed}): Collective ops")
    assert "resumes from the last checkpoint" in str(err)


def test_explain_trusts_the_message_when_the_peer_still_answers() -> None:
    with _listening() as peer, _listening() as me:
        layout = _layout_with_peer(peer.getsockname()[1], me.getsockname()[1])
        named = explain(RuntimeError(STOPPED_HEARTBEATS_1), layout)
        unrelated = explain(ValueError("shapes (3,) and (4,) are incompatible"), layout)
    assert named is not None and "lost worker 1 " in str(named)
    assert unrelated is None  # not about a peer: the original error stands


def test_explain_names_the_chief_when_its_coordination_service_stops_answering() -> None:
    """A frozen chief still accepts connections: the failed call to the service it hosts
    names it (TensorFlow's own message names no task)."""
    frozen = ("Collective ops is aborted by: Deadline Exceeded\n\n"
              "RPC: /tensorflow.CoordinationService/Heartbeat")
    with _listening() as chief, _listening() as me:
        ports = [chief.getsockname()[1], me.getsockname()[1]]
        worker = layout_from_workers([f"127.0.0.1:{p}" for p in ports], 1)
        chief_view = layout_from_workers([f"127.0.0.1:{p}" for p in ports], 0)
        named = explain(RuntimeError(frozen), worker)
        from_chief = explain(RuntimeError(frozen), chief_view)
    assert named is not None and "lost worker 0 " in str(named)
    assert from_chief is not None and "could not tell which" in str(from_chief)


def test_first_line_skips_tensorflow_boilerplate() -> None:
    text = "Graph execution error:\n\nDetected at node x\n  File \"a.py\"\nCollective ops boom"
    assert first_line(text) == "Collective ops boom"


def test_launch_local_overrides_make_a_multi_worker_config() -> None:
    ports = free_ports(3)
    assert len(set(ports)) == 3
    cfg = load_config(SAMPLES / "quickstart.toml", worker_overrides(ports))
    assert cfg.strategy.kind == "multi_worker"
    assert cfg.cluster.workers == tuple(f"127.0.0.1:{p}" for p in ports)
    command = worker_command("q.toml", ["a=1"], 2)
    assert command[-6:] == ["start", "q.toml", "--set", "a=1", "--task-index", "2"]


@pytest.mark.parametrize(
    ("code", "words"), [(1, "exit code 1"), (-9, "killed by SIGKILL"), (-15, "killed by SIGTERM")]
)
def test_describe_exit(code: int, words: str) -> None:
    assert describe_exit(code) == words


def test_children_do_not_inherit_a_cluster() -> None:
    env = environ_without_cluster({"TF_CONFIG": "{}", "SLURM_PROCID": "1",
                                   "SLURM_STEP_NUM_TASKS": "2", "SLURM_JOB_ID": "7", "HOME": "/h"})
    assert env == {"SLURM_JOB_ID": "7", "HOME": "/h"}


def test_join_watchdog_names_the_worker_that_never_came(capsys: pytest.CaptureFixture[str]) -> None:
    from distagent.cluster.strategy import JoinWatchdog

    closed = free_ports(1)[0]
    exits: list[int] = []
    with _listening() as me:
        layout = _layout_with_peer(closed, me.getsockname()[1])
        with JoinWatchdog(layout, 0.2, exit_process=exits.append, hard_exit=False):
            deadline = time.monotonic() + 60  # the strategy would be waiting here
            while not exits and time.monotonic() < deadline:
                time.sleep(0.05)
    assert exits == [1]
    err = capsys.readouterr().err
    assert f"worker 1 (worker:1 at 127.0.0.1:{closed}) did not join within 0.2 s" in err


def test_join_watchdog_stays_quiet_when_the_cluster_forms() -> None:
    from distagent.cluster.strategy import JoinWatchdog

    exits: list[int] = []
    with JoinWatchdog(layout_from_workers(TWO, 0), 30.0, exit_process=exits.append):
        pass  # the real faulthandler timer is armed, then cancelled: the test process lives on
    assert exits == []


def test_launcher_ends_only_its_own_unended_record(tmp_path: Path) -> None:
    from distagent.commands.launch_local import end_unended_record
    from distagent.train.rundir import write_json_atomic
    from distcore import names

    path = tmp_path / names.RUN_JSON
    write_json_atomic(path, {"status": "running", "pid": 4242, "last_step": 7})
    assert not end_unended_record(tmp_path, 4343, "x")  # another process's run: left alone
    assert json.loads(path.read_text())["status"] == "running"
    assert end_unended_record(tmp_path, 4242, "worker 0 (a) failed: killed by SIGABRT")
    record = json.loads(path.read_text())
    assert (record["status"], record["error_step"]) == ("failed", 7)
    assert record["error"] == "worker 0 (a) failed: killed by SIGABRT" and record["end_time"]
    assert not end_unended_record(tmp_path, 4242, "again")  # an ended record stays as it is


def test_collectives_keep_their_traced_keys(tf: Any, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The private switch that keeps a two-worker job's memory flat exists in the installed
    TensorFlow (an upgrade that renames it fails here, not silently in a week-long job), and
    a TensorFlow without it gets one line, not a crash."""
    from tensorflow.python.distribute import cross_device_utils

    launcher = cross_device_utils.CollectiveReplicaLauncher
    assert hasattr(launcher, UNIQUE_KEY_SWITCH)
    monkeypatch.setattr(launcher, UNIQUE_KEY_SWITCH, True)
    reuse_instance_keys()
    assert getattr(launcher, UNIQUE_KEY_SWITCH) is False
    monkeypatch.delattr(launcher, UNIQUE_KEY_SWITCH)
    reuse_instance_keys()
    (line,) = capsys.readouterr().err.splitlines()
    assert UNIQUE_KEY_SWITCH in line and "bench/agent_soak.py" in line


def test_launch_local_notices_a_dead_worker_while_the_chief_still_runs() -> None:
    """Worker 1 fails at once while worker 0 would run on: the linger starts then, and worker
    0 is killed at its end (before, only the chief's own exit was noticed: it ran to its end)."""
    long = [sys.executable, "-c", "import time; time.sleep(60)"]
    failing = [sys.executable, "-c", "raise SystemExit(5)"]
    workers = Workers([long, failing], {}, io.StringIO())
    try:
        codes = workers.wait(linger_seconds=0.5)
    finally:
        workers.close()
    assert codes == [-9, 5]


def test_the_preemption_watcher_s_failure_is_one_line(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorFlow's watcher thread fails when the chief (its coordination service) is gone:
    one line, while any other thread's exception still reaches the hook it had."""
    import threading

    from distagent.train.preempt import quiet_watcher_failures

    passed_on: list[str] = []
    monkeypatch.setattr(threading, "excepthook",
                        lambda args: passed_on.append(str(args.exc_value)))

    def fail(message: str) -> None:
        raise RuntimeError(message)

    quiet_watcher_failures()
    quiet_watcher_failures()  # once per process: not wrapped twice
    lost = ("Graph execution error:\n\nDetected at node x\nUNAVAILABLE: failed to connect to "
            "all addresses\nAdditional GRPC error information from remote target")
    for name, message in (("PeerTerminationWatcher-1", lost), ("other", "not ours")):
        thread = threading.Thread(target=fail, args=(message,), name=name)
        thread.start()
        thread.join()
    assert capsys.readouterr().err == (
        "distagent: the preemption watcher stopped (the chief's coordination service is gone): "
        "UNAVAILABLE: failed to connect to all addresses\n")
    assert passed_on == ["not ours"]

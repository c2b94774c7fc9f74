"""A real single-node Slurm for the tests: munged, slurmctld and slurmd from a temporary directory.

Debian's `slurm-wlm` and `munge` (22.05 here), started by the test and stopped after it. Nothing
of the machine's own configuration is read or changed: munged gets its own key and socket, the
daemons and the client commands read the temporary `slurm.conf` through `SLURM_CONF`, and every
state, spool, pid and log file lives in the temporary directory. No cgroups (linuxproc process
tracking, no task plugin) and no accounting database, so it runs in a container as root.

The `slurm` fixture is module-scoped: one cluster per module, as a cluster takes seconds to start
and the tests share it (each job has its own id and logdir); `slurm_cluster(root)` starts one
elsewhere.

Clusters started at once on one machine (two pytest processes, a CI run beside a developer's)
share nothing: their daemons listen on ports the kernel said were free, srun and slurmstepd bind
to port 0 (no SrunPortRange), and each cluster numbers its jobs in a block of ids no other
running cluster holds (an flock on a file in the temporary directory), because distagent derives
a step's worker ports from its job id: two clusters both numbering from 1 would start their
first jobs' workers on the same ports.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from distagent.cluster.scheduler import SLURM_PORT_SLOTS, SLURM_STEPS_PER_JOB
from distagent.commands.launch_local import free_ports
from tests.kit.wait import wait_until

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld",
           "slurmd": "/usr/sbin/slurmd"}
CLIENTS = ("srun", "sbatch", "squeue", "scontrol", "scancel", "sinfo", "mungekey")
INSTALL_HINT = "apt-get install slurm-wlm munge (.ci/run installs them)"
NODE_CPUS = 8  # declared, not counted: two 2-task jobs fit at once on a 2-core machine
START_SECONDS = 60.0


def missing_binaries() -> list[str]:
    gone = [name for name, path in DAEMONS.items() if not os.access(path, os.X_OK)]
    return gone + [name for name in CLIENTS if shutil.which(name) is None]


JOB_BLOCKS = 4
"""Clusters that can run at once on one machine; a fifth waits for one of them to stop."""
JOBS_PER_BLOCK = SLURM_PORT_SLOTS // SLURM_STEPS_PER_JOB // JOB_BLOCKS
"""Job ids a cluster numbers its jobs with (32, a module runs about 10 jobs): job ids
SLURM_PORT_SLOTS / SLURM_STEPS_PER_JOB apart get the same ports, so the blocks split that cycle
and MaxJobId wraps a cluster's ids back into its own block."""
BLOCK_LOCK = "distmon-slurm-test-jobs-{}.lock"
CLAIM_SECONDS = 900.0


def job_ids(block: int) -> range:
    """The job ids of a cluster that holds `block`: FirstJobId to MaxJobId."""
    first = 1 + block * JOBS_PER_BLOCK
    return range(first, first + JOBS_PER_BLOCK)


def claim_block(timeout: float = CLAIM_SECONDS) -> tuple[int, IO[bytes]]:
    """A block of job ids no other running cluster on this machine holds, and the open lock
    file that holds it (closing it, or the process ending, gives it back)."""
    return wait_until(_free_block, f"a block of job ids to come free ({JOB_BLOCKS} Slurm test "
                      "clusters run on this machine)", timeout, every=1.0)


def _free_block() -> tuple[int, IO[bytes]] | None:
    for block in range(JOB_BLOCKS):
        lock = open(Path(tempfile.gettempdir()) / BLOCK_LOCK.format(block), "ab")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return block, lock
    return None


SLURM_CONF = """\
ClusterName=distmon-test
SlurmctldHost={node}(127.0.0.1)
SlurmUser={user}
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={root}/ctld
SlurmdSpoolDir={root}/slurmd
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SchedulerType=sched/builtin
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=30
MessageTimeout=10
JobRequeue=1
FirstJobId={first_job}
MaxJobId={max_job}
PlugStackConfig={root}/plugstack.conf
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""


def node_name() -> str:
    """`hostname -s`, as on a real cluster; TensorFlow's workers dial the node by this name, so
    where it does not resolve (a bare container) the node is `localhost`."""
    name = socket.gethostname().split(".")[0]
    try:
        socket.gethostbyname(name)
    except OSError:
        return "localhost"
    return name


@dataclass
class SlurmCluster:
    root: Path
    node: str = field(default_factory=node_name)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    block: int | None = None
    """The block of job ids this cluster holds while it runs (`job_ids`)."""
    _lock: IO[bytes] | None = None

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment a client command (srun, sbatch, squeue ...) runs with."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, *args: str, timeout: float = 30.0, check: bool = True,
            env: Mapping[str, str] | None = None, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                                env=dict(env or self.env), cwd=cwd)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {result.returncode}: "
                                 f"{result.stderr.strip()[-2000:]}\n{self.logs()}")
        return result

    def start(self) -> None:
        for sub in ("munge", "ctld", "slurmd", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        self._start_munged()
        user = "root" if os.geteuid() == 0 else os.environ.get("USER", "root")
        (self.root / "plugstack.conf").write_text("")
        self.block, self._lock = claim_block()
        ids = job_ids(self.block)
        ctld_port, slurmd_port = free_ports(2)
        self.conf.write_text(SLURM_CONF.format(
            root=self.root, node=self.node, user=user, ctld_port=ctld_port,
            slurmd_port=slurmd_port, cpus=NODE_CPUS, first_job=ids[0], max_job=ids[-1]))
        env = self.env
        self.procs["slurmctld"] = self._daemon(
            [DAEMONS["slurmctld"], "-D", "-i", "-f", str(self.conf)], "slurmctld", env)
        self.procs["slurmd"] = self._daemon(
            [DAEMONS["slurmd"], "-D", "-f", str(self.conf), "-N", self.node], "slurmd", env)
        self.wait_idle()

    def _start_munged(self) -> None:
        key = self.root / "munge" / "munge.key"
        subprocess.run(["mungekey", "--create", "--keyfile", str(key)], check=True,
                       capture_output=True, timeout=30)
        os.chmod(key, 0o600)
        self.procs["munged"] = self._daemon([
            DAEMONS["munged"], "--foreground", "--force",
            f"--socket={self.root}/munge/munge.socket", f"--key-file={key}",
            f"--log-file={self.root}/log/munged.log", f"--pid-file={self.root}/munge/munged.pid",
            f"--seed-file={self.root}/munge/munged.seed",
        ], "munged", self.env)
        def listening() -> bool:
            self._check_alive()
            return (self.root / "munge" / "munge.socket").exists()

        wait_until(listening, "munged's socket", START_SECONDS, detail=self.logs)

    def _daemon(self, argv: list[str], name: str, env: Mapping[str, str]
                ) -> subprocess.Popen[bytes]:
        out = open(self.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 (the daemon's stdout)
        try:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=dict(env),
                                    start_new_session=True)
        finally:
            out.close()

    def _check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise AssertionError(f"Slurm daemon(s) exited: {dead}\n{self.logs()}")

    def wait_idle(self, timeout: float = START_SECONDS) -> None:
        """Until `sinfo` says the node is idle: the cluster takes jobs."""
        def idle() -> bool:
            self._check_alive()
            result = self.run("sinfo", "-h", "-n", self.node, "-o", "%T", check=False,
                              timeout=15)
            return result.returncode == 0 and result.stdout.strip() == "idle"

        wait_until(idle, f"node {self.node} idle", timeout, every=0.2, detail=self.logs)

    def job_state(self, job_id: str) -> str:
        """The job's state as scontrol says it (PENDING, RUNNING, COMPLETED, CANCELLED ...)."""
        out = self.run("scontrol", "show", "job", "-o", job_id, check=False).stdout
        for word in out.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return ""

    def wait_state(self, job_id: str, states: tuple[str, ...], timeout: float = 120.0) -> str:
        def reached() -> str:
            state = self.job_state(job_id)
            return state if state in states else ""

        return wait_until(reached, f"job {job_id} in {states}", timeout, every=0.2,
                          detail=lambda: f"it is {self.job_state(job_id)!r}")

    def release_requeued(self, job_id: str, timeout: float = 90.0) -> None:
        """Start a requeued job now rather than after the begin time Slurm holds it back by
        (two minutes), once that is safe: PENDING, its node no longer completing it, and the
        clock a whole second past both. The requeue revoked the job's credential, and slurmd
        refuses a credential made within the second of a revocation (whole seconds, `Job
        credential revoked`): a release that came 0.1 s after the requeue ended the job."""
        self.wait_state(job_id, ("PENDING",), timeout=timeout)
        wait_until(lambda: "COMPLETING" not in self.run(
            "scontrol", "show", "node", "-o", self.node).stdout,
            f"node {self.node} done completing {job_id}", timeout, every=0.1)
        second = int(time.time())
        wait_until(lambda: int(time.time()) > second, "the next whole second on the daemons' clock")
        self.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")

    def logs(self, tail: int = 1500) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            text = path.read_text(errors="replace")
            if text.strip():
                parts.append(f"--- {path.name}\n{text[-tail:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.run("scancel", "--full", "--user", os.environ.get("USER", "root"), check=False,
                     timeout=10)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._lock is not None:  # after the daemons: no job of ours is left on its ports
            self._lock.close()
            self._lock = None


@contextlib.contextmanager
def slurm_cluster(root: Path) -> Iterator[SlurmCluster]:
    """A started cluster under `root`, stopped on exit; skips when Slurm is not installed."""
    gone = missing_binaries()
    if gone:
        pytest.skip(f"Slurm/munge not installed ({', '.join(gone)} missing): {INSTALL_HINT}")
    if os.geteuid() != 0:
        pytest.skip("the Slurm tests start slurmd, which launches jobs as root: run them as root")
    cluster = SlurmCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """One started cluster for the module's tests; skips where Slurm is not installed."""
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster

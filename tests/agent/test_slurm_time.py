"""How a Slurm job ends, and where its time went: distagent under a real Slurm.

Through the shipped `sample_configs/slurm/train.sbatch` (shrunk by `tiny`): when the job
finishes, is cancelled (`scancel`) or requeued (`scontrol requeue`), every process of the job
exits, and the job leaves the queue (or goes back to PENDING), within TEARDOWN_SECONDS
of the end run.json records, with no TensorFlow coordination-service errors in its output. A
requeued job that resumes and finishes keeps both attempts in its ledger, the pending gap in
`scheduler`. Under `srun -n 2`: worker 1 blocks in its model (tests/agent/stuck_model.py) and
distmon names it in a `hung` alert, with both workers' stacks on disk; with
`cluster.on_hang = "abort"` every worker ends `hung` and the job leaves the queue.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from distcore import names
from tests.agent.stuck_model import STUCK_AFTER_ENV, STUCK_JOB
from tests.agent.test_slurm import (
    REPO,
    SBATCH,
    TOML,
    checkpoint_step,
    distmon_json,
    job_env,
    run_json,
    sbatch,
    tiny,
    wait_until,
)
from tests.kit.slurm import SlurmCluster

pytestmark = pytest.mark.slow

TEARDOWN_SECONDS = 5.0
"""From run.json's end to the last process gone and the job out of the queue (the figures are
printed). Measured on a 2-core machine at load 6: 0.2-2.1 s; with TensorFlow's own teardown at
interpreter exit (sys.exit where distagent ends with os._exit) the finished job took 9.3 s."""
COORDINATION_ERROR = re.compile(r"coordination.?service|Socket closed", re.I)


def job_processes(slurm: SlurmCluster, job_id: str) -> list[psutil.Process]:
    """Every live process of the job (batch shell, the workers and their stderr filters), by
    the SLURM_JOB_ID and SLURM_CONF in its environment (another test's cluster on the machine
    numbers its jobs from 1 too)."""
    found = []
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
            if env.get("SLURM_JOB_ID") == job_id and env.get("SLURM_CONF") == str(slurm.conf) \
                    and _alive(proc):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def in_queue(slurm: SlurmCluster, job_id: str) -> bool:
    out = slurm.run("squeue", "--noheader", "--format=%i %T", f"--jobs={job_id}",
                    check=False).stdout
    return any(line.split()[:1] == [job_id] for line in out.splitlines())


@dataclass
class Teardown:
    """Seconds after run.json's end_time at which the last process was seen gone and the job
    left RUNNING/COMPLETING (out of squeue, or back to PENDING after a requeue)."""

    processes: float
    queue: float
    seen: int  # how many processes of the job were watched

    def check(self, what: str) -> None:
        print(f"{what}: {self.seen} processes gone {self.processes:.2f} s, job out of the running "
              f"queue "
              f"{self.queue:.2f} s after run.json's end (at most {TEARDOWN_SECONDS:g} s)")
        assert self.processes < TEARDOWN_SECONDS and self.queue < TEARDOWN_SECONDS, (what, self)


def watch_end(slurm: SlurmCluster, job_id: str, run_dir: Path, ended: str,
              requeued: bool = False, timeout: float = 150.0) -> tuple[dict[str, Any], Teardown]:
    """Follow the job until run.json says `ended` and then until its processes are gone and it
    has left the queue (PENDING again, when `requeued`); the processes are gathered while it
    runs, so none is missed."""
    procs: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + timeout
    record: dict[str, Any] = {}
    while time.monotonic() < deadline:
        procs.update((p.pid, p) for p in job_processes(slurm, job_id))
        record = run_json(run_dir)
        if record.get("status") == ended and record.get("end_time"):
            break
        assert record.get("status") in (None, names.STATUS_RUNNING, ended), record
        time.sleep(0.1)
    else:
        raise AssertionError(f"run.json not {ended} in {timeout} s: {record.get('status')}\n"
                             f"{slurm.logs()}")
    assert len(procs) >= 2, procs  # at least the two workers were seen
    gone: dict[str, float] = {}
    while time.monotonic() < deadline and len(gone) < 2:
        if "processes" not in gone and not [p for p in procs.values() if _alive(p)]:
            gone["processes"] = time.time()
        if "queue" not in gone:
            state = slurm.job_state(job_id)
            if (state == "PENDING") if requeued else not in_queue(slurm, job_id):
                gone["queue"] = time.time()
        time.sleep(0.05)
    left = [" ".join(p.cmdline()[:4]) for p in procs.values() if _alive(p)]
    assert len(gone) == 2, (gone, left, slurm.job_state(job_id))
    end = float(record["end_time"])
    return record, Teardown(gone["processes"] - end, gone["queue"] - end, len(procs))


def output_of(tmp: Path, job_id: str, run_dir: Path) -> str:
    """The job's stdout and stderr (the Slurm output file, and any output.log in the run)."""
    text = (tmp / f"slurm-{job_id}.out").read_text(errors="replace")
    log = run_dir / "output.log"
    return text + (log.read_text(errors="replace") if log.exists() else "")


def assert_quiet(text: str) -> None:
    noisy = [line for line in text.splitlines() if COORDINATION_ERROR.search(line)]
    assert not noisy, noisy[:10]
    assert "Traceback" not in text, text[-3000:]


def test_finish_and_scancel_end_the_job_in_seconds(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Both at once (the cluster has room for two): the second trains while the first ends.
    done_id = sbatch(slurm, tmp_path, str(SBATCH), str(TOML),
                     *tiny(tmp_path / "runs", steps=8, name="done"))
    run_dir = tmp_path / "runs" / "cancelled"
    job_id = sbatch(slurm, tmp_path, str(SBATCH), str(TOML),
                    *tiny(tmp_path / "runs", steps=400, latency=2.0, name="cancelled"))
    _, finished = watch_end(slurm, done_id, tmp_path / "runs" / "done", names.STATUS_FINISHED)
    finished.check("finished")
    assert slurm.job_state(done_id) == "COMPLETED"
    assert_quiet(output_of(tmp_path, done_id, tmp_path / "runs" / "done"))
    wait_until("a first checkpoint", lambda: checkpoint_step(run_dir) > 0, slurm=slurm)
    slurm.run("scancel", job_id)
    record, cancelled = watch_end(slurm, job_id, run_dir, names.STATUS_STOPPED)
    cancelled.check("scancel")
    assert slurm.job_state(job_id) == "CANCELLED"
    assert checkpoint_step(run_dir) == record["last_step"]
    assert_quiet(output_of(tmp_path, job_id, run_dir))


def test_requeue_ends_in_seconds_and_the_ledger_keeps_both_attempts(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    run_dir = tmp_path / "runs" / "requeued"
    job_id = sbatch(slurm, tmp_path, str(SBATCH), str(TOML),
                    *tiny(tmp_path / "runs", steps=48, latency=2.0, name="requeued"))
    wait_until("a first checkpoint", lambda: checkpoint_step(run_dir) > 0, slurm=slurm)
    slurm.run("scontrol", "requeue", job_id)
    stopped, requeue = watch_end(slurm, job_id, run_dir, names.STATUS_STOPPED, requeued=True)
    requeue.check("requeue")
    slurm.release_requeued(job_id)
    wait_until("the second attempt", lambda: run_json(run_dir).get("resumed_from"), slurm=slurm)
    final, finished = watch_end(slurm, job_id, run_dir, names.STATUS_FINISHED)
    finished.check("finished after the requeue")
    assert final["last_step"] == 48 and final["scheduler"]["restart_count"] == "1"
    assert_quiet(output_of(tmp_path, job_id, run_dir))

    # Both attempts in one ledger: the job's start is the first attempt's, the pending gap
    # between the two is `scheduler`, and the wall time spans both.
    ledger = final["ledger"]
    first_end, second_start = float(stopped["end_time"]), float(final["ledger_attempt_start"])
    assert final["ledger_start"] < first_end < second_start, final
    assert ledger["scheduler"] > 0.5 * (second_start - first_end), (ledger, first_end)
    assert final["ledger_wall"] > float(final["end_time"]) - first_end, final
    doc = distmon_json(slurm, tmp_path / "runs")
    [job] = [j for j in doc["jobs"] if j["name"] == "requeued"]
    shown = job["ledger"]
    assert shown["source"] == "agent" and 0 < shown["goodput"] <= 1, shown
    unknown = shown["seconds"]["unknown"] / shown["wall_seconds"]
    print(f"ledger over two attempts: wall {shown['wall_seconds']:.1f} s, goodput "
          f"{shown['goodput']:.1%}, scheduler {shown['seconds']['scheduler']:.1f} s, "
          f"unknown {unknown:.1%}")
    assert 0 <= unknown < 0.25, shown  # tiny job: startup and teardown weigh much




def srun_stuck(slurm: SlurmCluster, tmp: Path, name: str, on_hang: str
               ) -> subprocess.Popen[str]:
    """`srun -n 2` of a job whose worker 1 blocks in its model's 7th forward pass. Its own
    hang_seconds is shorter, so it finds the hang first: it is the one that leaves first."""
    config = tmp / f"{name}.toml"
    config.write_text(STUCK_JOB.format(name=name, logdir=tmp / "runs", timeout_seconds=60,
                                       hang_seconds=4, on_hang=on_hang))
    stuck = (f'if [ "$SLURM_PROCID" = 1 ]; then export {STUCK_AFTER_ENV}=6; '
             f'set -- --set cluster.hang_seconds=1.5; fi; exec distagent start {config} "$@"')
    env = job_env(slurm)
    env["PYTHONPATH"] = f"{REPO}:{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(REPO)
    out = open(tmp / f"{name}.out", "w")  # noqa: SIM115 (srun's output, read by the test)
    try:
        return subprocess.Popen(["srun", "-n", "2", "--label", f"--job-name={name}",
                                 f"--chdir={tmp}", "bash", "-c", stuck, "bash"],
                                stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
    finally:
        out.close()


def job_named(slurm: SlurmCluster, name: str) -> str:
    def found() -> str:
        out = slurm.run("squeue", "--noheader", "--format=%i", f"--name={name}").stdout
        return out.split()[0] if out.split() else ""
    return str(wait_until(f"job {name} in squeue", found, timeout=60, slurm=slurm))


def hung_alerts(doc: dict[str, Any], name: str) -> str:
    return " | ".join(a["message"] for a in doc["alerts"]
                      if a["kind"] == "hung" and name in (a.get("run") or ""))


def test_a_hang_under_srun_names_worker_1_and_abort_ends_it(slurm: SlurmCluster,
                                                            tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    jobs = {"waits": srun_stuck(slurm, tmp_path, "waits", "warn"),
            "aborts": srun_stuck(slurm, tmp_path, "aborts", "abort")}
    ids = {name: job_named(slurm, name) for name in jobs}
    try:
        # on_hang = "abort": every worker ends `hung` (exit code 3) and the job leaves squeue.
        record, ended = watch_end(slurm, ids["aborts"], tmp_path / "runs" / "aborts",
                                  names.STATUS_HUNG)
        ended.check("abort on a hang")
        assert jobs["aborts"].wait(timeout=30) != 0
        text = (tmp_path / "aborts.out").read_text()
        for i in range(2):
            assert re.search(rf"^{i}: distagent: worker {i}: hung: ", text, re.M), text[-3000:]
        assert "worker 1" in record["message"], record["message"]
        assert_quiet(text)

        # on_hang = "warn": the job waits on, and distmon names the worker that holds it.
        run_dir = tmp_path / "runs" / "waits"

        def named() -> str:
            assert jobs["waits"].poll() is None, (tmp_path / "waits.out").read_text()[-3000:]
            message = hung_alerts(distmon_json(slurm, tmp_path / "runs"), "waits")
            return message if "2 stack dumps" in message else ""

        message = wait_until("a hung alert with both workers' stacks", named, slurm=slurm)
        assert "worker 1 never reached the reduction" in message, message
        for i in range(2):
            assert f"{run_dir}/{names.stacks_name(i)}" in message, message
            assert "distagent/train/loop.py" in (run_dir / names.stacks_name(i)).read_text()
        assert "in wait_for_the_remote_service" in (run_dir / names.stacks_name(1)).read_text()
        aborted = hung_alerts(distmon_json(slurm, tmp_path / "runs"), "aborts")
        assert "job ended hung" in aborted and "worker 1" in aborted, aborted
    finally:
        for name, proc in jobs.items():  # the stuck worker would ignore a SIGTERM
            slurm.run("scancel", "--signal=KILL", ids[name], check=False)
            proc.wait(timeout=60)

"""distagent under a real Slurm (tests/kit/slurm.py), and distmon asking it.

One single-node cluster for the module: munged, slurmctld and slurmd from a temporary
directory. Through it: `srun -n 2` and the shipped `sample_configs/slurm/train.sbatch` each
train one two-worker job at the same time (in sync, on distinct ports, recorded in run.json);
`scontrol requeue` stops a job at a checkpoint and its next start resumes from it; `scancel`
checkpoints and ends it `stopped`; an agent killed with SIGKILL leaves run.json `running` and
distmon raises the alert once Slurm says the job ended, or once the step that ran it is gone
while the job goes on. Models and step counts are tiny.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from distcore import names
from distcore.jobs.scheduler import STEP_START_MARGIN
from distcore.jobs.slurm_states import COMMAND_TIMEOUT_SECONDS, SlurmStates
from tests.kit.slurm import SlurmCluster
from tests.kit.wait import wait_until as kit_wait_until
from tests.tui.test_serve import Serve, sample, scrape

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SBATCH = REPO / "sample_configs" / "slurm" / "train.sbatch"
TOML = REPO / "sample_configs" / "slurm" / "train.toml"
DIGEST = re.compile(r"worker (\d+) \(worker:\d+ at [^:]+:(\d+)\): (\w+); weights digest (\w+)")


def tiny(logdir: Path, *, steps: int, latency: float = 0.0, name: str = "job") -> list[str]:
    """`--set` overrides that shrink the shipped config to seconds of training."""
    sets = {"run.name": json.dumps(name), "run.logdir": json.dumps(str(logdir)),
            "data.synthetic.num_examples": "640", "data.synthetic.input_shape": "[8]",
            "data.synthetic.read_latency_ms": str(latency), "data.per_replica_batch_size": "16",
            "data.validation_fraction": "0.0", "model.hidden_units": "[8]",
            "train.epochs": "1", "train.steps_per_epoch": str(steps),
            "train.log_every_steps": "2", "train.checkpoint_every_steps": "4",
            "cluster.timeout_seconds": "30"}
    return [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]


def job_env(slurm: SlurmCluster) -> dict[str, str]:
    """What a user's shell would have: distagent on PATH, this checkout first on PYTHONPATH."""
    env = slurm.env
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.pop("TF_CONFIG", None)
    return env


def sbatch(slurm: SlurmCluster, tmp: Path, *args: str, env: Mapping[str, str] | None = None
           ) -> str:
    """Submit; the job runs with `env` (sbatch exports it to the job), by default job_env's."""
    out = slurm.run("sbatch", "--parsable", f"--chdir={tmp}", f"--output={tmp}/slurm-%j.out",
                    *args, env=env or job_env(slurm)).stdout
    return out.strip().split(";")[0]


def run_json(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / names.RUN_JSON).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def wait_until(what: str, check: Any, timeout: float = 150.0, slurm: SlurmCluster | None = None
               ) -> Any:
    return kit_wait_until(check, what, timeout, every=0.2, detail=slurm.logs if slurm else None)


def checkpoint_step(run_dir: Path) -> int:
    try:
        state = (run_dir / names.CHECKPOINT_DIR / "checkpoint").read_text()
    except OSError:
        return -1
    match = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', state, re.M)
    return int(match.group(1)) if match else -1


def distmon_json(slurm: SlurmCluster, logdir: Path) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-m", "distmon", "--once", "--json", "--no-gpu",
                             str(logdir)], capture_output=True, text=True, env=job_env(slurm),
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


def test_srun_and_sbatch_train_two_jobs_at_once(slurm: SlurmCluster, tmp_path: Path) -> None:
    # The shipped batch script and a plain srun, both on the one node at the same time.
    batch_id = sbatch(slurm, tmp_path, str(SBATCH), str(TOML),
                      *tiny(tmp_path / "runs", steps=8, name="batch"))
    srun = subprocess.run(
        ["srun", "-n", "2", f"--chdir={tmp_path}", "distagent", "start", str(TOML),
         "--set", "strategy.kind=multi_worker", *tiny(tmp_path / "runs", steps=8, name="step")],
        capture_output=True, text=True, env=job_env(slurm), timeout=240)
    srun_out = srun.stdout + srun.stderr
    assert srun.returncode == 0, srun_out[-3000:]
    slurm.wait_state(batch_id, ("COMPLETED", "FAILED", "CANCELLED"), timeout=180)
    batch_out = (tmp_path / f"slurm-{batch_id}.out").read_text()
    assert slurm.job_state(batch_id) == "COMPLETED", batch_out[-3000:]

    ports = {}
    for name, out in (("step", srun_out), ("batch", batch_out)):
        found = {int(i): (port, status, digest) for i, port, status, digest in DIGEST.findall(out)}
        assert set(found) == {0, 1}, out[-3000:]
        assert found[0][1:] == found[1][1:] and found[0][1] == names.STATUS_FINISHED, found
        ports[name] = {found[0][0], found[1][0]}
        assert "Traceback" not in out and "deprecat" not in out.lower(), out[-3000:]
        run_dir = tmp_path / "runs" / name
        record = run_json(run_dir)
        assert record["status"] == names.STATUS_FINISHED and record["last_step"] == 8
        sched = record["scheduler"]
        assert sched["kind"] == "slurm" and sched["partition"] == "debug", sched
        assert sched["node_list"] == slurm.node and sched["step_id"] == "0", sched
        # Only the chief writes events; both workers record their own system samples.
        assert len(list((run_dir / names.TRAIN_DIR).glob("*tfevents*"))) == 1
        for i in range(2):
            assert list((run_dir / names.worker_system_dir(i)).glob("*tfevents*")), (name, i)
    assert run_json(tmp_path / "runs" / "batch")["scheduler"]["job_id"] == batch_id
    assert not ports["step"] & ports["batch"], ports  # two jobs, one node: distinct ports

    # distmon names each job's Slurm job and what Slurm says of it.
    doc = distmon_json(slurm, tmp_path / "runs")
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert jobs["batch"]["scheduler"]["job_id"] == batch_id
    assert {jobs[n]["scheduler"]["state"] for n in ("batch", "step")} == {"COMPLETED"}
    assert not [a for a in doc["alerts"] if a["kind"] == "agent_died"]


def test_requeue_resumes_and_scancel_stops(slurm: SlurmCluster, tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "long"
    job_id = sbatch(slurm, tmp_path, str(SBATCH), str(TOML),
                    *tiny(tmp_path / "runs", steps=400, latency=2.0, name="long"))
    output = tmp_path / f"slurm-{job_id}.out"
    wait_until("a first checkpoint", lambda: checkpoint_step(run_dir) > 0, slurm=slurm)

    # As after a preemption: Slurm signals the job, puts it back in the queue, starts it again.
    slurm.run("scontrol", "requeue", job_id)
    stopped = wait_until("run.json stopped after the requeue", lambda: run_json(run_dir).get(
        "status") == names.STATUS_STOPPED and run_json(run_dir), slurm=slurm)
    slurm.release_requeued(job_id)
    resumed = wait_until("the requeued job resuming", lambda: (
        run_json(run_dir).get("status") == names.STATUS_RUNNING
        and run_json(run_dir).get("resumed_from") and run_json(run_dir)), slurm=slurm)
    assert resumed["scheduler"]["restart_count"] == "1", resumed["scheduler"]
    wait_until("a checkpoint past the stop",
               lambda: checkpoint_step(run_dir) > stopped["last_step"], slurm=slurm)
    assert f"from step {stopped['last_step']} " in output.read_text()

    # scancel: every task gets SIGTERM, the workers agree on a step and checkpoint there.
    cancelled_at = time.monotonic()
    slurm.run("scancel", job_id)
    final = wait_until("run.json stopped after scancel", lambda: run_json(run_dir).get(
        "status") == names.STATUS_STOPPED and run_json(run_dir), timeout=60, slurm=slurm)
    took = time.monotonic() - cancelled_at
    slurm.wait_state(job_id, ("CANCELLED",), timeout=60)
    assert final["last_step"] > stopped["last_step"]
    assert checkpoint_step(run_dir) == final["last_step"], took
    text = output.read_text()
    assert "Traceback" not in text and "deprecat" not in text.lower(), text[-3000:]
    doc = distmon_json(slurm, tmp_path / "runs")
    assert doc["jobs"][0]["scheduler"]["state"] == "CANCELLED"
    assert not [a for a in doc["alerts"] if a["kind"] == "agent_died"]


def test_agent_killed_without_a_word_is_an_alert(slurm: SlurmCluster, tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "doomed"
    job_id = sbatch(slurm, tmp_path, "--ntasks=1", "--wrap",
                    f"distagent start {TOML} --set strategy.kind=mirrored "
                    f"--set strategy.cpu_replicas=1 "
                    # Steps enough to outlast a loaded machine's distmon --once: it is killed.
                    + " ".join(f"'{a}'" for a in tiny(tmp_path / "runs", steps=20000, latency=2.0,
                                                      name="doomed")))
    record = wait_until("the job running", lambda: run_json(run_dir).get("last_step")
                        and run_json(run_dir), slurm=slurm)
    assert record["scheduler"]["job_id"] == job_id and record["scheduler"]["step_id"] == "batch"
    # While Slurm runs it, distmon shows the job's id and state and raises nothing.
    doc = distmon_json(slurm, tmp_path / "runs")
    assert doc["jobs"][0]["scheduler"]["state"] == "RUNNING"
    assert not [a for a in doc["alerts"] if a["kind"] == "agent_died"]

    os.kill(int(record["pid"]), signal.SIGKILL)  # no chance to write its end
    slurm.wait_state(job_id, ("FAILED", "CANCELLED", "COMPLETED"), timeout=60)
    assert run_json(run_dir)["status"] == names.STATUS_RUNNING

    def alerted() -> dict[str, Any] | None:  # once the end is 30 s old (SETTLE_SECONDS)
        found = distmon_json(slurm, tmp_path / "runs")
        return found if [a for a in found["alerts"] if a["kind"] == "agent_died"] else None

    doc = wait_until("agent_died", alerted, timeout=120)
    died = [a for a in doc["alerts"] if a["kind"] == "agent_died"]
    assert len(died) == 1 and died[0]["severity"] == "critical", doc["alerts"]
    assert f"Slurm job {job_id} is FAILED" in died[0]["message"]
    text = subprocess.run([sys.executable, "-m", "distmon", "--once", "--no-gpu", "--check",
                           str(tmp_path / "runs")], capture_output=True, text=True,
                          env=job_env(slurm), timeout=120)
    assert text.returncode == 1  # --check: a critical alert
    assert f"Slurm job {job_id} (FAILED)" in text.stdout and "died without a word" in text.stdout


def test_a_dead_step_of_a_running_job_is_an_alert(slurm: SlurmCluster, tmp_path: Path) -> None:
    """The batch script goes on after srun (or an salloc shell does): the job stays RUNNING while
    the step that ran distagent was killed. squeue --steps tells it; distmon raises agent_died
    naming the step, and raises nothing while the step lives."""
    run_dir = tmp_path / "runs" / "stepped"
    job_id = sbatch(slurm, tmp_path, "--ntasks=1", "--wrap",
                    f"srun distagent start {TOML} --set strategy.kind=mirrored "
                    f"--set strategy.cpu_replicas=1 --set data.cache=false "
                    + " ".join(f"'{a}'" for a in tiny(tmp_path / "runs", steps=4000, latency=20.0,
                                                      name="stepped"))
                    + "; echo after the step; sleep 600")
    try:
        record = wait_until("the job running", lambda: run_json(run_dir).get("last_step")
                            and run_json(run_dir), slurm=slurm)
        assert record["scheduler"]["job_id"] == job_id and record["scheduler"]["step_id"] == "0"
        started = float(record["start_time"])
        wait_until("a listing after the step began",  # before it, absence proves nothing
                   lambda: time.time() > started + STEP_START_MARGIN + 0.5)
        doc = distmon_json(slurm, tmp_path / "runs")
        assert doc["jobs"][0]["scheduler"]["state"] == "RUNNING"
        assert not [a for a in doc["alerts"] if a["kind"] == "agent_died"], doc["alerts"]

        os.kill(int(record["pid"]), signal.SIGKILL)  # the step's one task: no word written
        steps = ("squeue", "--noheader", "--steps", "--format=%i", f"--jobs={job_id}")
        wait_until("the step gone", lambda: f"{job_id}.0" not in slurm.run(*steps).stdout
                   and "after the step" in (tmp_path / f"slurm-{job_id}.out").read_text(),
                   slurm=slurm)
        assert slurm.job_state(job_id) == "RUNNING"
        assert run_json(run_dir)["status"] == names.STATUS_RUNNING
        # One listing proves nothing (--once); --serve's listings over 30 s do.
        serve = Serve(tmp_path, ["--metrics", "0", "--no-gpu", str(tmp_path / "runs")],
                      env=job_env(slurm))
        try:
            port = serve.port()
            died = wait_until("agent_died in /metrics", lambda: sample(
                scrape(port), "distmon_alert", kind="agent_died", job="stepped"), timeout=120)
            assert died == 1 and slurm.job_state(job_id) == "RUNNING"
            # The info series carries the job's real Slurm id and Slurm's own answer (once
            # squeue answered: before it, the job's process gone from this machine said it).
            assert wait_until("Slurm's state in /metrics", lambda: sample(
                scrape(port), "distmon_job_info", job="stepped", scheduler="slurm",
                slurm_job_id=job_id, state="RUNNING"), timeout=120) == 1
        finally:
            assert serve.stop() == 0, serve.stderr()
        doc = distmon_json(slurm, tmp_path / "runs")
        assert doc["jobs"][0]["scheduler"]["state"] == "RUNNING"
        assert not [a for a in doc["alerts"] if a["kind"] == "agent_died"]  # one listing
    finally:
        slurm.run("scancel", job_id, check=False)


def test_the_real_commands_without_accounting(slurm: SlurmCluster) -> None:
    """distmon's Slurm producer against the real squeue and sacct of a cluster without slurmdbd:
    a job the controller does not know is unknown (no error), sacct's real refusal is
    recognised and sacct is not asked again."""
    asked: list[str] = []

    def runner(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        asked.append(Path(argv[0]).name)
        return slurm.run(*argv, check=False, timeout=COMMAND_TIMEOUT_SECONDS)

    states = SlurmStates(runner=runner)
    states.track(["999999"])
    assert states.query_once() and states.query_once()
    assert asked == ["squeue", "sacct", "squeue"], asked
    assert states.states() == {} and states.errors() == ()
    refusal = slurm.run("sacct", "--noheader", "--jobs=999999", check=False)
    assert refusal.returncode != 0 and "accounting storage is disabled" in refusal.stderr


def test_multi_worker_in_the_batch_script_outside_srun_says_so(slurm: SlurmCluster,
                                                               tmp_path: Path) -> None:
    job_id = sbatch(slurm, tmp_path, "--ntasks=1", "--wrap",
                    f"distagent start {TOML} --set strategy.kind=multi_worker "
                    f"--set 'run.logdir=\"{tmp_path}/runs\"'")
    slurm.wait_state(job_id, ("FAILED", "COMPLETED"), timeout=120)
    lines = (tmp_path / f"slurm-{job_id}.out").read_text().strip().splitlines()
    assert slurm.job_state(job_id) == "FAILED"
    assert len(lines) == 1, lines
    assert f"Slurm job {job_id}: this is the batch script, not a job step" in lines[0]
    assert "srun distagent start" in lines[0]


def task_pid(slurm: SlurmCluster, job_id: str, rank: int) -> int | None:
    """The `distagent start` process of task `rank` of the job's step on this cluster, by its
    environment; not its stderr filter (quiet.py), a fork with the same command line."""
    import psutil

    found: dict[int, int] = {}  # pid: parent's pid
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        argv = proc.info["cmdline"] or [""]
        if (env.get("SLURM_JOB_ID") == job_id and env.get("SLURM_CONF") == str(slurm.conf)
                and env.get("SLURM_STEP_ID") not in (None, "batch")
                and env.get("SLURM_PROCID") == str(rank) and "distagent start" in " ".join(argv)
                and Path(argv[0]).name != "srun"):
            found[int(proc.pid)] = int(proc.info["ppid"])
    tasks = [pid for pid, parent in found.items() if parent not in found]
    return tasks[0] if len(tasks) == 1 else None


def test_a_worker_killed_in_the_batch_script_fails_the_other_naming_it(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    """No hang in a collective, and the survivor's own account kept: distagent's collective and
    heartbeat timeouts (cluster.timeout_seconds) end worker 0 with `failed`, naming worker 1,
    within that time. srun --kill-on-bad-exit would kill worker 0 before it said so."""
    run_dir = tmp_path / "runs" / "halved"
    job_id = sbatch(slurm, tmp_path, str(SBATCH), str(TOML),
                    *tiny(tmp_path / "runs", steps=400, latency=2.0, name="halved"))
    wait_until("a first checkpoint", lambda: checkpoint_step(run_dir) > 0, slurm=slurm)
    pid = wait_until("worker 1's process", lambda: task_pid(slurm, job_id, 1), timeout=30)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    record = wait_until("run.json failed", lambda: run_json(run_dir).get(
        "status") == names.STATUS_FAILED and run_json(run_dir), timeout=120, slurm=slurm)
    assert time.monotonic() - killed_at < 30 + 30  # cluster.timeout_seconds, and a margin
    assert "lost worker 1 (worker:1 at " in record["error"], record["error"]
    slurm.wait_state(job_id, ("FAILED",), timeout=60)
    text = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert re.search(r"^0: .*lost worker 1 \(worker:1 at ", text, re.M), text[-3000:]
    assert "Traceback" not in text, text[-3000:]

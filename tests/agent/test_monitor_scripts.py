"""Plain user scripts (tests/agent/user_scripts), watched by the monitor, as distmon sees them.

Real processes, a real two-worker MultiWorkerMirroredStrategy on loopback ports (TF_CONFIG set
here, as `launch-local` does), real files and the distmon CLI; nothing faked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distagent.commands.launch_local import free_ports
from distcore import names
from distcore.jobs.agent import read_run_json
from tests.agent.test_multiworker import child_env
from tests.agent.test_multiworker_hang import distmon_once
from tests.kit.wait import wait_until

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "user_scripts"


def script(name: str, *args: str, env: dict[str, str] | None = None,
           log: Path | None = None) -> subprocess.Popen[bytes]:
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen([sys.executable, str(SCRIPTS / name), *args],
                            stdout=out, stderr=subprocess.STDOUT, env=env or child_env())


def alerts(logdir: Path, kind: str) -> list[str]:
    return [a["message"] for a in distmon_once(logdir)["alerts"] if a["kind"] == kind]


def test_distmon_names_a_fit_script_input_bound_and_never_its_parallel_twin(
        tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    for variant in ("sequential", "parallel"):
        logdir = tmp_path / variant
        proc = script("fit_input.py", str(logdir),
                      *(["--parallel"] if variant == "parallel" else []))
        procs.append(proc)
        assert proc.wait(timeout=240) == 0
        assert (read_run_json(logdir / "fit") or {}).get("status") == names.STATUS_FINISHED
    assert any("input-bound" in m for m in alerts(tmp_path / "sequential", "input_stall"))
    assert alerts(tmp_path / "parallel", "input_stall") == []


def test_a_loop_blocked_in_the_users_code_is_named_hung_with_its_stacks(
        tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    release = tmp_path / "release"
    proc = script("custom_loop.py", str(tmp_path), "--steps", "12", "--block-at", "8",
                  "--release", str(release), "--hang-seconds", "3")
    procs.append(proc)
    hung = wait_until(lambda: proc.poll() is None and alerts(tmp_path, "hung"), "hung alert", 180,
                      every=0.3)
    # Quoted at run.json's last step, the step the job's row shows (written at log points).
    shown = (read_run_json(tmp_path / "loop") or {}).get("last_step")
    assert isinstance(shown, int) and 0 <= shown <= 8
    assert f"job hung after step {shown}" in hung[0], hung
    stacks = (tmp_path / "loop" / names.stacks_name(0)).read_text()
    assert "custom_loop.py" in stacks and "in main" in stacks
    release.touch()
    assert proc.wait(timeout=120) == 0
    assert (read_run_json(tmp_path / "loop") or {}).get("status") == names.STATUS_FINISHED


def test_two_workers_name_the_throttled_one_the_straggler(
        tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    for index in range(2):
        env = child_env()
        env["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers},
                                       "task": {"type": "worker", "index": index}})
        procs.append(script("custom_loop.py", str(tmp_path), "--steps", "100000",
                            "--sleep-ms", "60" if index == 1 else "0", env=env,
                            log=tmp_path / f"worker-{index}.log"))
    found = wait_until(lambda: all(p.poll() is None for p in procs)
                       and alerts(tmp_path, "straggler"), "straggler alert", 240, every=0.3)
    assert found[0].startswith("worker 1 "), found

"""`distagent scale`: any `--replicas`/`--steps` text is a plan or one line; a signal to `scale`
stops the child that trains (a real SIGTERM, a real SIGKILL); each rerun gets its own run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distagent.commands.scale import (
    MAX_REPLICAS,
    MAX_STEPS,
    check_steps,
    new_scale_run_dir,
    parse_replicas,
)
from distagent.config import load_config
from distcore.errors import DistmonError
from tests.kit.wait import WaitTimeout, wait_until

QUICKSTART = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
COUNTISH = st.text(alphabet="0123456789, -+_e.٣\t", max_size=12)


def agent(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distagent", *args], capture_output=True,
                          text=True, env=ENV, timeout=timeout, stdin=subprocess.DEVNULL)


def expected_replicas(text: str) -> list[int] | None:
    """The rule, written out: comma-separated ASCII decimal counts 1..MAX_REPLICAS."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isascii() and p.isdigit() and len(p) <= 6 for p in parts):
        return None
    counts = sorted({int(p) for p in parts})
    return counts if counts[0] >= 1 and counts[-1] <= MAX_REPLICAS else None


@settings(max_examples=500, deadline=None)
@given(text=COUNTISH | st.text(max_size=20)
       | st.lists(st.integers(-3, 100_000), min_size=1, max_size=5).map(
           lambda xs: ",".join(map(str, xs))))
def test_any_replicas_text_is_a_list_or_one_line(text: str) -> None:
    want = expected_replicas(text)
    try:
        got = parse_replicas(text)
    except DistmonError as err:
        assert want is None and str(err).startswith("--replicas: ")
        assert "\n" not in str(err) and str(err).isprintable()
    else:
        assert got == want


@pytest.mark.parametrize("steps", [0, -1, MAX_STEPS + 1, 10**12])
def test_steps_out_of_bounds(steps: int) -> None:
    with pytest.raises(DistmonError, match=f"--steps: expected 1 to {MAX_STEPS:,}"):
        check_steps(steps)


@settings(max_examples=25, deadline=None)
@given(replicas=COUNTISH | st.sampled_from(["257", "100000", "1,2,256", "1,257", "4"]),
       steps=st.integers(-5, 10**7).map(str) | st.sampled_from(["1e9", "abc", "", "5"]))
@example(replicas="--", steps="0")  # found in CI: argparse stored [] for `--replicas=--`
def test_any_replicas_and_steps_through_the_cli(tmp_path_factory: pytest.TempPathFactory,
                                                replicas: str, steps: str) -> None:
    """The real CLI, with a config that does not exist: valid figures reach the config check
    (so none of these trains), invalid ones are refused first, in one line, exit 2."""
    config = tmp_path_factory.mktemp("c") / "none.toml"
    done = agent("scale", str(config), f"--replicas={replicas}", f"--steps={steps}")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    last = done.stderr.splitlines()[-1]
    try:
        steps_value: int | None = int(steps)
    except ValueError:
        steps_value = None
    if replicas == "--":  # argparse drops a bare `--`: refused as a missing value
        assert "argument --replicas: expected one value" in last
    elif steps_value is None:  # argparse's own usage error
        assert "argument --steps: invalid int value" in last
    elif expected_replicas(replicas) is None:
        assert done.stderr.startswith("distagent: --replicas: ") and len(
            done.stderr.splitlines()) == 1
    elif not 1 <= steps_value <= MAX_STEPS:
        assert done.stderr == f"distagent: --steps: expected 1 to {MAX_STEPS:,} timed steps, " \
                              f"got {steps_value}\n"
    else:
        assert "no such file" in done.stderr and str(config) in done.stderr


def test_each_rerun_gets_its_own_run(tmp_path: Path) -> None:
    cfg = load_config(QUICKSTART, [f"run.logdir={tmp_path}"])
    made = [new_scale_run_dir(cfg) for _ in range(3)]
    assert [p.name for p in made] == ["quickstart-scale", "quickstart-scale-2",
                                      "quickstart-scale-3"]
    assert all(p.is_dir() for p in made)


def _start_scale(tmp_path: Path) -> tuple[subprocess.Popen[str], psutil.Process]:
    parent = subprocess.Popen(
        [sys.executable, "-m", "distagent", "scale", str(QUICKSTART), "--replicas", "1",
         "--steps", str(MAX_STEPS), "--set", f"run.logdir={tmp_path}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    def training_child() -> psutil.Process | None:
        for child in psutil.Process(parent.pid).children():
            try:
                if "--child-replicas" in child.cmdline():
                    return child
            except psutil.NoSuchProcess:
                pass
        assert parent.poll() is None, parent.communicate()
        return None

    try:  # the child has exec'd: it is the training process
        return parent, wait_until(training_child, "the training child")
    except WaitTimeout:
        parent.kill()
        raise


@pytest.mark.slow
def test_sigterm_to_scale_stops_its_child(tmp_path: Path) -> None:
    parent, child = _start_scale(tmp_path)
    try:
        parent.send_signal(signal.SIGTERM)
        _, err = parent.communicate(timeout=60)
        assert parent.returncode == 128 + signal.SIGTERM
        assert err.splitlines()[-1] == ("distagent: scale: stopped by SIGTERM (the training "
                                        "child was stopped too)")
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
        assert not (tmp_path / "quickstart-scale").exists()  # nothing measured, no empty run
    finally:
        parent.kill()
        parent.wait()
        if child.is_running():
            child.kill()


@pytest.mark.slow
def test_sigkill_to_scale_takes_its_child_with_it(tmp_path: Path) -> None:
    parent, child = _start_scale(tmp_path)
    try:
        parent.kill()  # no handler runs: the kernel's parent-death signal does the work
        parent.wait()
        _, alive = psutil.wait_procs([child], timeout=30)
        assert not alive, "the training child outlived scale (an orphan)"
    finally:
        if child.is_running():
            child.kill()

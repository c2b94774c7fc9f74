"""A job's end is recorded whatever the disk, through the real `distagent start`.

A disk that fills during a job (a small tmpfs, filled by another file) or a run directory that
stops taking new files (`chattr +i`: EPERM on create) used to end the job with two chained
tracebacks and run.json `running` for ever: run.json's new temporary file was refused too. Now
the record is written over the existing file, and the job's last line names the cause.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distagent.train.rundir import RunRecord
from distcore import names
from distcore.errors import StorageError, storage_problem
from tests.agent.test_cli_runs import wait_for
from tests.agent.test_recovery_ends import DISTAGENT, ENV, job, record, write

LONG = {"steps_per_epoch": 100000, "log_every_steps": 10, "checkpoint_every_steps": 200}


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@contextlib.contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """`paths` take no new entries (EPERM), their existing files still written in place."""
    try:
        for path in paths:
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"chattr +i refused (needs root and ext4/tmpfs): {done.stderr}")
        yield
    finally:
        for path in paths:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def fill(directory: Path) -> None:
    """Every free block of `directory`'s filesystem, taken by one file."""
    with contextlib.suppress(OSError), open(directory / "filler", "wb") as out:
        while True:
            out.write(b"\0" * (1 << 16))
            out.flush()


def started(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([DISTAGENT, "start", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=config.parent,
                            stdin=subprocess.DEVNULL)


def logged(run_dir: Path) -> bool:
    """A step recorded, and the heartbeat written: that file too is then written over in place
    when no new file can be made (one never written would warn once)."""
    if not (run_dir / names.heartbeat_name(0)).exists():
        return False
    with contextlib.suppress(OSError, ValueError):
        step = record(run_dir).get("last_step")
        return isinstance(step, int) and step > 0
    return False


def ended(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def one_line(stderr: str) -> str:
    # Heartbeats too are written over their files when no new file can be made: no warnings.
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_disk_that_fills_mid_job_ends_it_failed_in_one_line(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "2m") as disk:
        config = write(tmp_path / "job.toml", job(disk, "full", **LONG))
        proc = started(config)
        run_dir = disk / "full"
        wait_for(lambda: logged(run_dir), proc)
        fill(disk)
        code, stderr = ended(proc)
        # Whichever write meets the full disk first says so: the events', or a checkpoint's.
        cause = re.compile(rf"(checkpoint save failed: )?disk full on {re.escape(str(run_dir))}")
        assert code == 1 and cause.match(one_line(stderr).removeprefix("distagent: ")), stderr
        rec = record(run_dir)
        assert rec["status"] == names.STATUS_FAILED and cause.match(rec["error"]), rec["error"]


def test_a_checkpoint_the_disk_refuses_is_one_line_and_leaves_no_partial_save(
        tmp_path: Path) -> None:
    # Adam's slots for a 256x1024 layer are 3 MiB: the first save cannot fit in 1 MiB.
    raw = job(tmp_path / "unused", "big", optimizer={"name": "adam"})
    raw["data"]["synthetic"]["input_shape"] = [256]
    raw["model"]["hidden_units"] = [1024]
    with tmpfs(tmp_path / "disk", "1m") as disk:
        raw["run"]["logdir"] = str(disk)
        proc = started(write(tmp_path / "job.toml", raw))
        code, stderr = ended(proc)
        checkpoints = disk / "big" / names.CHECKPOINT_DIR
        assert code == 1
        assert one_line(stderr) == f"distagent: checkpoint save failed: disk full on {checkpoints}"
        rec = record(disk / "big")
        assert rec["status"] == names.STATUS_FAILED
        assert rec["error"] == f"checkpoint save failed: disk full on {checkpoints}"
        assert list(checkpoints.iterdir()) == []


def test_a_run_directory_that_stops_taking_files_still_records_the_end(tmp_path: Path) -> None:
    config = write(tmp_path / "job.toml", job(tmp_path, "frozen", **LONG))
    run_dir = tmp_path / "frozen"
    (run_dir / names.CHECKPOINT_DIR).mkdir(parents=True)  # to be made immutable while in use
    proc = started(config)
    wait_for(lambda: logged(run_dir), proc)
    with immutable(run_dir, run_dir / names.CHECKPOINT_DIR):
        code, stderr = ended(proc)
        rec = record(run_dir)
    cause = f"cannot write in {run_dir / names.CHECKPOINT_DIR} (operation not permitted)"
    assert code == 1 and one_line(stderr) == f"distagent: checkpoint save failed: {cause}"
    assert rec["status"] == names.STATUS_FAILED and rec["error"].endswith(cause)


def test_run_json_is_rewritten_in_place_without_its_traceback_when_that_fits(
        tmp_path: Path) -> None:
    freed: list[bool] = []
    rec = RunRecord(tmp_path, {"status": "running", "pad": "x" * 300},
                    free_space=lambda: freed.append(True))
    rec.update()
    with immutable(tmp_path):
        rec.update(status="failed", pad=None, traceback="Traceback ...\n" * 100)
    written: dict[str, Any] = json.loads((tmp_path / names.RUN_JSON).read_text())
    assert written["status"] == "failed" and written["traceback"] is None and freed == [True]
    assert sorted(os.listdir(tmp_path)) == [names.RUN_JSON]


def test_run_json_that_cannot_be_written_at_all_is_one_line(tmp_path: Path) -> None:
    rec = RunRecord(tmp_path, {"status": "running"})
    with immutable(tmp_path), pytest.raises(StorageError) as caught:
        rec.update(status="failed")
    assert str(caught.value) == (f"cannot write in {tmp_path} (operation not permitted): "
                                 f"{tmp_path / names.RUN_JSON} not updated (No such file or "
                                 "directory)")


CKPT = "/r/checkpoints/ckpt-3_temp/part-00000-of-00001.data-00000-of-00001.tempstate33"


@pytest.mark.parametrize(("message", "where", "expected"), [
    # TensorFlow's own texts, as a full disk and a refused directory raised them.
    ("{{function_node __wrapped__SaveV2_dtypes_19_device_/job:localhost/replica:0/task:0/device:"
     f"CPU:0}} {CKPT}; No space left on device [Op:SaveV2]", "/r/checkpoints",
     "disk full on /r/checkpoints"),
    ("Graph execution error:\n\nDetected at node perf/write_summary\n/r/train/events.out.tfevents"
     ".1.vm.2.v2; No space left on device\n\tFailed to flush 11 events", None,
     "disk full on /r/train"),
    (f"{CKPT}; Disk quota exceeded", None, "disk quota exceeded on /r/checkpoints/ckpt-3_temp"),
    ("Could not create /r/checkpoints/ckpt-5_temp; Operation not permitted", "/r",
     "cannot write in /r (operation not permitted)"),
    ("No space left on device", None, "disk full on this disk"),
    # Not a refused write: a read's "Permission denied" and anything else are left alone.
    ("/data/train.tfrecord; Permission denied", None, None),
    ("Incompatible shapes: [8,3] vs. [8,4]", None, None),
])
def test_a_refused_write_is_named_by_its_cause_and_place(message: str, where: str | None,
                                                        expected: str | None) -> None:
    assert storage_problem(RuntimeError(message), where) == expected


@pytest.mark.parametrize(("number", "expected"), [
    (errno.ENOSPC, "disk full on /r"), (errno.EDQUOT, "disk quota exceeded on /r"),
    (errno.EPERM, "cannot write in /r (operation not permitted)"),
    (errno.EACCES, "cannot write in /r (permission denied)"), (errno.EIO, None),
])
def test_an_os_error_is_named_by_its_errno(number: int, expected: str | None) -> None:
    err = OSError(number, os.strerror(number), "/r/.run.json.abc.tmp")
    assert storage_problem(err) == expected


def test_partial_saves_left_by_a_killed_job_are_removed_and_nothing_else(tmp_path: Path) -> None:
    checkpoints = tmp_path / "again" / names.CHECKPOINT_DIR
    for leftover in ("ckpt-3_temp", "ckpt-40_temp"):
        (checkpoints / leftover).mkdir(parents=True)
        (checkpoints / leftover / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"0" * 99)
    for kept in ("mine_temp", "ckpt-3_temp.notes"):
        (checkpoints / kept).mkdir()
    proc = started(write(tmp_path / "job.toml", job(tmp_path, "again")))
    code, stderr = ended(proc)
    assert code == 0, stderr
    assert record(tmp_path / "again")["status"] == names.STATUS_FINISHED
    assert not list(checkpoints.glob("ckpt-*_temp"))
    assert (checkpoints / "mine_temp").is_dir() and (checkpoints / "ckpt-3_temp.notes").is_dir()


def test_a_log_points_record_is_written_by_a_thread_whose_error_the_next_one_raises(
        tmp_path: Path) -> None:
    """`later`: the training thread goes on while run.json is replaced; a write that failed
    there is raised by the next log point's update, and the job's final record is written."""
    rec = RunRecord(tmp_path, {"status": "running"}, at_write=lambda: {"threads": 7})
    rec.update(later=True, last_step=1)
    wait_for(lambda: (tmp_path / names.RUN_JSON).exists())  # replaced whole: never half
    assert record(tmp_path)["threads"] == 7

    def raised() -> bool:
        try:
            rec.update(later=True, last_step=2)
        except IsADirectoryError:
            return True
        return False

    (tmp_path / names.RUN_JSON).unlink()
    (tmp_path / names.RUN_JSON).mkdir()  # os.replace onto a directory: IsADirectoryError
    wait_for(raised)
    (tmp_path / names.RUN_JSON).rmdir()
    rec.update(status="finished", last_step=4)
    rec.close()
    assert record(tmp_path) == {"status": "finished", "last_step": 4, "threads": 7}

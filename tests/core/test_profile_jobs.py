"""The jobs' profiles: the reader that finds and summarises each job's latest profile once, the
input-stall rule from a profile, and how a profile reaches a job (its alert names the run)."""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import pytest

from distcore import names
from distcore.alerts.profile import profile_input_bound
from distcore.events.snapshots import RunSnapshot
from distcore.jobs.profiles import ProfileReader, latest_profile, profile_run, with_profile
from distcore.jobs.snapshots import Job
from distcore.location import RunLocation
from distcore.profile import Bottleneck, ProfileError, ProfileSummary, Stage, StepTime, summarize
from tests.core.profile_files import space, training_steps, write
from tests.tui.fixed import run, series

NOW = 1_000.0


def summary(input_percent: float, *, steps: int = 4, bottleneck: bool = True,
            path: str = "/logs/j/train/plugins/profile/t/h.xplane.pb") -> ProfileSummary:
    step = 100.0 * steps
    stage = Stage("Iterator::Root::MapAndBatch", 80.0, 0.9, {"parallelism": 1})
    return ProfileSummary(
        path=path, hostnames=("h",), events=10, step_source="step markers", steps=(),
        step_count=steps,
        total=StepTime(steps, step, step * input_percent / 100, 0.0, 0.0, 0.0, 0.0),
        input_percent=input_percent, input_verdict="", stages=(stage,),
        bottleneck=Bottleneck(stage, "`map` runs at parallelism 1: `num_parallel_calls=...`")
        if bottleneck else None,
        top_ops=(), streams=(),
    )


PLAIN = {"train": run("j/train", series("loss", [1.0, 0.5]))}
WITH_WAIT = {"train": run("j/train", series(names.INPUT_WAIT_FRACTION, [0.5, 0.5]))}


@pytest.mark.parametrize(
    ("profile", "parts", "severity", "said"),
    [
        (summary(95.0), PLAIN, "critical", "highly input-bound"),
        (summary(20.0), PLAIN, "critical", "highly input-bound"),
        (summary(12.0), PLAIN, "warning", "moderately input-bound"),
        (summary(4.9), PLAIN, None, None),
        (summary(95.0, steps=0), PLAIN, None, None),  # no steps: no share to speak of
        (summary(95.0), WITH_WAIT, None, None),  # the series says it, newer than a profile
        (summary(50.0, bottleneck=False), PLAIN, "critical", "names no tf.data stage"),
    ],
)
def test_the_profile_rule_bands_and_words(
    profile: ProfileSummary, parts: dict[str, RunSnapshot], severity: str | None,
    said: str | None,
) -> None:
    alert = profile_input_bound(profile, parts, "j/train", NOW)
    if severity is None:
        assert alert is None
        return
    assert alert is not None and alert.severity == severity and alert.run == "j/train"
    assert said is not None and said in alert.message
    if profile.bottleneck is not None:
        assert "Iterator::Root::MapAndBatch" in alert.message
        assert "`num_parallel_calls=...`" in alert.message


def _job(directory: Path, parts: dict[str, RunSnapshot]) -> Job:
    return Job("j", RunLocation.on_this_machine(directory), parts, "live", None, (), ())


def test_a_profile_reaches_its_job_and_its_alert_names_the_run_that_holds_it() -> None:
    job = _job(Path("/logs/j"), PLAIN)  # its train run is /logs/j/train
    merged = with_profile(job, summary(95.0), NOW)
    assert merged.profile is not None and [a.run for a in merged.alerts] == ["j/train"]
    beside = summary(95.0, path="/logs/j/plugins/profile/t/h.xplane.pb")
    assert profile_run(job, beside) == "j"  # in the job's own folder: the job
    error = ProfileError("/logs/j/x.xplane.pb", "truncated")
    assert with_profile(job, error, NOW) == dataclasses.replace(job, profile=error)
    assert with_profile(job, None, NOW) is job


def _profile(job: Path, session: str = "2026_01_01_00_00_00") -> Path:
    folder = job / "train" / "plugins" / "profile" / session
    folder.mkdir(parents=True, exist_ok=True)
    return write(folder / "host.xplane.pb", space({"/host:CPU": training_steps(4)}))


class Counting:
    """The real summary, counted per path."""

    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, path: Path, timeout_s: float) -> ProfileSummary | ProfileError:
        self.calls.append(path)
        return summarize(path, timeout_s=timeout_s)


def test_each_profile_is_read_once_and_again_only_when_it_changes(tmp_path: Path) -> None:
    counting = Counting()
    reader = ProfileReader(summarizer=counting)
    first = _profile(tmp_path / "a")
    (tmp_path / "b").mkdir()  # a job with no profile
    reader.watch({tmp_path / "a": [tmp_path / "a" / "train"], tmp_path / "b": []})
    reader.read_once()
    found = reader.latest()
    assert set(found) == {tmp_path / "a"} and isinstance(found[tmp_path / "a"], ProfileSummary)
    reader.read_once()
    assert counting.calls == [first] and reader.latest() is found  # nothing new: same mapping
    newer = _profile(tmp_path / "a", "2026_01_02_00_00_00")
    reader.read_once()
    assert counting.calls == [first, newer]
    newer.write_bytes(newer.read_bytes()[:40])  # rewritten: read again, now unreadable
    reader.read_once()
    assert counting.calls == [first, newer, newer]
    answer = reader.latest()[tmp_path / "a"]
    assert isinstance(answer, ProfileError) and answer.message.startswith("profile unreadable")
    reader.watch({}, keep={tmp_path / "b"})  # a job gone: its profile is forgotten
    assert dict(reader.latest()) == {}


def test_once_names_the_profiles_it_had_no_time_to_read(tmp_path: Path) -> None:
    counting = Counting()
    reader = ProfileReader(summarizer=counting)
    path = _profile(tmp_path / "a")
    reader.watch({tmp_path / "a": [tmp_path / "a" / "train"]})
    reader.read_once(timeout_s=0.0)
    answer = reader.latest()[tmp_path / "a"]
    assert counting.calls == [] and isinstance(answer, ProfileError)
    assert answer.path == str(path) and "not read within the 0 s" in answer.message


def test_the_thread_reads_new_profiles_and_says_so(tmp_path: Path) -> None:
    reader = ProfileReader(interval=3600.0)  # only `watch` wakes it
    told = threading.Event()
    reader.subscribe(told.set)
    reader.start()
    try:
        _profile(tmp_path / "a")
        reader.watch({tmp_path / "a": [tmp_path / "a" / "train"]})
        assert told.wait(120), "no summary"
        assert isinstance(reader.latest()[tmp_path / "a"], ProfileSummary)
        assert reader.errors() == ()
    finally:
        reader.close()


def test_the_latest_profile_is_the_newest_session_of_the_jobs_folders(tmp_path: Path) -> None:
    folders = [tmp_path, tmp_path / "train"]
    assert latest_profile(folders) is None
    _profile(tmp_path, "2026_01_02_00_00_00")
    newest = _profile(tmp_path, "2026_01_03_00_00_00")
    _profile(tmp_path, "2026_01_01_00_00_00")
    (tmp_path / "plugins" / "profile" / "2026_01_02_00_00_01").mkdir(parents=True)  # empty
    assert latest_profile([tmp_path]) is None  # the job's own folder holds none
    found = latest_profile(folders)
    assert found is not None and found[0] == newest
    assert found[1:] == (newest.stat().st_size, os.stat(newest).st_mtime_ns)

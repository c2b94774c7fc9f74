"""RunLocation: a run's place as a value (this machine, an SSH host, a URL), never a local-looking
path decoded back by string surgery (moved here from test_remote_cli's run_path_text table)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.jobs.parts import job_dir_of
from distcore.location import RunLocation


@pytest.mark.parametrize(
    ("location", "text", "local"),
    [
        (RunLocation.on_this_machine("/data/runs/a"), "/data/runs/a", Path("/data/runs/a")),
        (RunLocation.on_host("gpu1", "/data/runs/a"), "gpu1:/data/runs/a", None),
        (RunLocation.on_host("gpu1", "runs/a"), "gpu1:runs/a", None),
        (RunLocation.on_host("gpu1", "~/runs/./a"), "gpu1:~/runs/a", None),
        (RunLocation.at_url("s3://bucket/runs/a"), "s3://bucket/runs/a", None),
        (RunLocation.at_url("s3://bucket/runs/a/"), "s3://bucket/runs/a", None),
        (RunLocation.at_url("gs://b"), "gs://b", None),
        # A local folder whose name holds a colon is local (scp's rule: no colon before a slash).
        (RunLocation.on_this_machine("/data/a:b"), "/data/a:b", Path("/data/a:b")),
    ],
)
def test_places_as_shown(location: RunLocation, text: str, local: Path | None) -> None:
    assert str(location) == text
    assert location.local == local
    assert location.remote is (local is None)


def test_a_relative_local_place_is_shown_absolute(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert str(RunLocation.on_this_machine("runs/a")) == str(tmp_path / "runs" / "a")


@pytest.mark.parametrize(
    ("run", "part", "job"),
    [
        (RunLocation.on_host("gpu1", "/data/job/train"), "train", "gpu1:/data/job"),
        (RunLocation.on_host("gpu1", "/d/job/system/worker-1"), "system/worker-1", "gpu1:/d/job"),
        (RunLocation.at_url("s3://b/sweep/job/validation"), "validation", "s3://b/sweep/job"),
        (RunLocation.on_host("gpu1", "/data/lone"), "", "gpu1:/data/lone"),
    ],
)
def test_a_jobs_directory_stays_in_its_place(run: RunLocation, part: str, job: str) -> None:
    found = job_dir_of(run, part)
    assert str(found) == job and (found.host, found.scheme) == (run.host, run.scheme)


def test_joinpath_and_parents_agree() -> None:
    """The remote tail keys run.json by `base.joinpath(job)`, the index looks it up by walking
    up from a run's place: the same value both ways."""
    base = RunLocation.on_host("gpu1", "/data/runs")
    run = base.joinpath("job/train")
    assert run.parents[0] == base.joinpath("job") and run.parents[1] == base
    assert base.joinpath(".") == base and run.name == "train"
    assert hash(run.parents[0]) == hash(base.joinpath("job"))


def test_a_place_is_on_a_host_or_under_a_url_not_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        RunLocation(PurePosixPath("x"), host="gpu1", scheme="s3")
    with pytest.raises(ValueError, match="not a URL"):
        RunLocation.at_url("bucket/x")


_NAME = st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1, max_size=12)


@given(host=st.sampled_from(["gpu1", "[::1]", "node-7"]), parts=st.lists(_NAME, max_size=4))
def test_remote_places_never_have_a_local_path(host: str, parts: list[str]) -> None:
    place = RunLocation.on_host(host, "/" + "/".join(parts))
    assert place.local is None and str(place).startswith(f"{host}:/")
    assert all(p.local is None for p in place.parents)
    assert all(p.host == host for p in place.joinpath("x").parents)

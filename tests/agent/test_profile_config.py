"""The `[profile]` table: hostile values are one line naming the key, exit 2, before
TensorFlow; sane ones are taken; off by default."""

from __future__ import annotations

import pytest

from distagent.config import config_from_dict
from distcore.errors import ConfigErrors
from tests.agent.test_untrusted_config import QUICKSTART, agent

HOSTILE = [
    ("profile.steps=[5, 3]", "profile.steps: expected [start, end] with 1 <= start < end"),
    ("profile.steps=[3, 3]", "got [3, 3]"),
    ("profile.steps=[0, 3]", "got [0, 3]"),
    ("profile.steps=[1, 2, 3]", "got [1, 2, 3]"),
    ("profile.steps=[4]", "got [4]"),
    ('profile.steps=[1, "a"]', "profile.steps: expected a list of integers"),
    ("profile.steps=[1, 99999999999999999999]", "profile.steps[1]: expected an integer within"),
    ("profile.input_bound_steps=0", "profile.input_bound_steps: expected an integer > 0"),
    ("profile.interval_minutes=0", "profile.interval_minutes: expected a number of minutes > 0"),
    ("profile.interval_minutes=nan", "got NaN"),
    ("profile.interval_minutes=-1", "got -1.0"),
    ('profile.on_input_bound="yes"', "profile.on_input_bound: expected"),
    ("profile.step=[1, 3]", 'profile.step: unknown key; did you mean "steps"?'),
]


@pytest.mark.parametrize(("override", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_profile_values_are_one_line(override: str, message: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        config_from_dict({}, label="job.toml", overrides=[override])
    lines = str(caught.value).splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert lines[0].startswith("job.toml") and ": profile." in lines[0]


def test_profiling_is_off_by_default_and_sane_values_are_taken() -> None:
    off = config_from_dict({}).profile
    assert (off.steps, off.on_input_bound) == ((), False)
    cfg = config_from_dict({"profile": {"steps": [3, 6], "on_input_bound": True,
                                        "interval_minutes": 0.5, "input_bound_steps": 4}})
    assert cfg.profile.steps == (3, 6) and cfg.profile.interval_minutes == 0.5


def test_the_cli_refuses_a_hostile_profile_window_in_one_line() -> None:
    done = agent("plan", str(QUICKSTART), "--set", "profile.steps=[6, 3]")
    assert done.returncode == 2, done.stderr
    error, probe = done.stderr.splitlines()
    assert error == ("distagent: quickstart.toml (--set): profile.steps: expected [start, end] "
                     "with 1 <= start < end, or [] (none), got [6, 3]")
    assert probe == "TF-ABSENT"

"""Hostile values for the hang keys: one line naming the key, exit 2, before TensorFlow."""

from __future__ import annotations

import pytest

from distagent.config import config_from_dict
from distcore.errors import ConfigErrors
from tests.agent.test_untrusted_config import QUICKSTART, agent

HOSTILE = [
    ("cluster.hang_seconds=0", 'cluster.hang_seconds: expected "auto" or a number of seconds > 0'),
    ("cluster.hang_seconds=-5", "got -5.0"),
    ("cluster.hang_seconds=nan", "got NaN"),
    ("cluster.hang_seconds=inf", "got Infinity"),
    ("cluster.hang_seconds=1e999", "got Infinity"),
    ('cluster.hang_seconds="soon"', 'cluster.hang_seconds: expected "auto" or a number, got'),
    ("cluster.hang_seconds=true", "got true"),
    ("cluster.hang_seconds=[1]", "cluster.hang_seconds: expected"),
    ('cluster.on_hang="kill"', 'cluster.on_hang: expected "warn" or "abort", got "kill"'),
    ("cluster.on_hang=1", "cluster.on_hang: expected"),
]


@pytest.mark.parametrize(("override", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_hang_values_are_one_line(override: str, message: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        config_from_dict({}, label="job.toml", overrides=[override])
    lines = str(caught.value).splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert lines[0].startswith("job.toml (--set): cluster.")


@pytest.mark.parametrize(("override", "seconds", "action"), [
    ("cluster.hang_seconds=0.5", 0.5, "warn"), ("cluster.hang_seconds=90", 90.0, "warn"),
    ('cluster.on_hang="abort"', "auto", "abort")])
def test_sane_hang_values_are_taken(override: str, seconds: object, action: str) -> None:
    cfg = config_from_dict({}, overrides=[override])
    assert (cfg.cluster.hang_seconds, cfg.cluster.on_hang) == (seconds, action)


def test_the_cli_refuses_a_hostile_hang_value_in_one_line() -> None:
    done = agent("plan", str(QUICKSTART), "--set", "cluster.hang_seconds=-1")
    assert done.returncode == 2, done.stderr
    error, probe = done.stderr.splitlines()
    assert error == ("distagent: quickstart.toml (--set): cluster.hang_seconds: expected "
                     '"auto" or a number of seconds > 0, got -1.0')
    assert probe == "TF-ABSENT"

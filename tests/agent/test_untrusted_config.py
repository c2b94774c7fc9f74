"""Hostile or absurd configs: one line naming the file or key, exit 2, no traceback, and no
TensorFlow loaded (so the refusal comes at once), through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distagent.config import MAX_CONFIG_BYTES, config_from_dict, load_config
from distcore.errors import ConfigErrors

QUICKSTART = Path(__file__).resolve().parents[2] / "sample_configs" / "quickstart.toml"
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
# Runs the CLI in-process and reports whether TensorFlow got imported on the way.
PROBE = (
    "import sys\n"
    "from distagent.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('TF-LOADED' if 'tensorflow' in sys.modules else 'TF-ABSENT', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def agent(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=60)


def _nested_arrays(path: Path) -> None:
    path.write_text("a = " + "[" * 800 + "]" * 800 + "\n")


def _nested_tables(path: Path) -> None:
    path.write_text("a = " + "{b = " * 800 + "1" + "}" * 800 + "\n")


def _huge(path: Path) -> None:
    with path.open("w") as out:  # 30 MB of valid TOML
        line = "# " + "x" * 98 + "\n"
        out.write(line * 300_000)


BAD_FILES: list[tuple[str, Callable[[Path], object], str]] = [
    ("latin1", lambda p: p.write_bytes(b'[run]\nname = "caf\xe9"\n'), "not UTF-8 text"),
    ("binary", lambda p: p.write_bytes(bytes(range(256)) * 8), "not a text file"),
    ("elf", lambda p: p.write_bytes(Path(sys.executable).resolve().read_bytes()[:4096]),
     "not a text file"),
    ("deep-arrays", _nested_arrays, "nested too deep"),
    ("deep-tables", _nested_tables, "nested too deep"),
    ("tens-of-mb", _huge, f"larger than {MAX_CONFIG_BYTES >> 20} MiB"),
    ("not-toml", lambda p: p.write_text("[run\nname = 1\n"), "not valid TOML"),
    ("escape-in-toml", lambda p: p.write_text('[run]\nname = "\x1b]0;pwned\x07"\n'),
     "not valid TOML"),
    ("directory", lambda p: p.mkdir(), "is a directory"),
]


@pytest.mark.parametrize(("name", "make", "message"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
@pytest.mark.parametrize("command", ["plan", "start"])
def test_unreadable_config_is_one_line(
    tmp_path: Path, name: str, make: Callable[[Path], object], message: str, command: str
) -> None:
    path = tmp_path / f"{name}.toml"
    make(path)
    done = agent(command, str(path))
    assert done.returncode == 2, done.stderr
    error, probe = done.stderr.splitlines()
    assert error.startswith(f"distagent: {path.name}" if name != "directory"
                            else f"distagent: {path}")
    assert message in error
    assert error.isprintable()  # no control character from the file reaches the terminal
    assert probe == "TF-ABSENT"
    assert done.stdout == ""


ABSURD = [
    ("strategy.cpu_replicas=100000", "strategy.cpu_replicas: expected at most 256"),
    ("run.seed=4294967296", "run.seed: expected at most 4294967295"),
    ("run.seed=-1", "run.seed: expected an integer >= 0"),
    ("run.seed=170141183460469231731687303715884105727", "run.seed: expected an integer within"),
    ("data.per_replica_batch_size=2147483648", "data.per_replica_batch_size: expected at most"),
    ("data.per_replica_batch_size=-9223372036854775809",
     "data.per_replica_batch_size: expected an integer within int64"),
    ("data.synthetic.input_shape=[65536,65536]", "data.synthetic.input_shape: expected dimen"),
    ("data.synthetic.input_shape=[9223372036854775808]", "data.synthetic.input_shape[0]: "),
    ("data.synthetic.num_classes=2147483647", "data.synthetic.num_classes: expected num_classes"),
    ("model.hidden_units=[4294967296]", "model.hidden_units: expected widths at most"),
    ("train.epochs=4294967296", "train.epochs: expected at most 2147483647"),
    ("train.steps_per_epoch=9223372036854775807", "train.epochs: expected epochs × steps_per"),
    ("data.synthetic.num_examples=9223372036854775807",
     "train.epochs: expected epochs × steps_per_epoch"),
    ("train.steps_per_execution=4294967296", "train.steps_per_execution: expected at most"),
    ("optimizer.base_batch_size=4294967296", "optimizer.base_batch_size: expected at most"),
]


@pytest.mark.parametrize(("override", "message"), ABSURD, ids=[a[0][:40] for a in ABSURD])
def test_absurd_values_are_refused_before_tensorflow(override: str, message: str) -> None:
    done = agent("plan", str(QUICKSTART), "--set", override)
    assert done.returncode == 2, done.stderr
    *errors, probe = done.stderr.splitlines()
    assert probe == "TF-ABSENT"
    assert any(message in line for line in errors), errors
    assert "Traceback" not in done.stderr


def test_start_refuses_absurd_values_before_tensorflow(tmp_path: Path) -> None:
    done = agent("start", str(QUICKSTART), "--set", f"run.logdir={tmp_path}",
                 "--set", "strategy.cpu_replicas=1000")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "distagent: quickstart.toml (--set): strategy.cpu_replicas: expected at most 256 "
        "logical CPU devices, got 1000",
        "TF-ABSENT",
    ]
    assert not any(tmp_path.iterdir())  # no run directory made for a refused job


def test_hostile_keys_are_escaped_in_the_error_line() -> None:
    done = agent("plan", str(QUICKSTART), "--set", "x\x1b]0;pwned\x07\x9b2J" + "k" * 10_000 + "=1")
    assert done.returncode == 2
    error = done.stderr.splitlines()[0]
    assert error.isprintable() and "\\x1b]0;pwned\\x07\\x9b2J" in error
    assert len(error) <= 2000


def test_the_limits_sit_where_the_bounds_are() -> None:
    ok = config_from_dict({"run": {"seed": 2**32 - 1}, "strategy": {"cpu_replicas": 256},
                           "data": {"per_replica_batch_size": 2**31 - 1}})
    assert (ok.run.seed, ok.strategy.cpu_replicas) == (2**32 - 1, 256)
    with pytest.raises(ConfigErrors) as caught:
        config_from_dict({"train": {"log_every_steps": 2**63}})
    assert [e.key for e in caught.value.errors] == ["train.log_every_steps"]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2048) | st.text(max_size=512).map(str.encode))
def test_any_bytes_load_or_fail_as_config_errors(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.toml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigErrors as err:
        assert all(str(e) for e in err.errors)


def _known_keys() -> list[tuple[str, ...]]:
    import dataclasses

    from distagent.config import config_to_dict
    from distagent.schema import JobConfig

    def walk(table: dict[str, Any], prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        keys: list[tuple[str, ...]] = []
        for key, value in table.items():
            is_table = isinstance(value, dict) and type(value) is dict
            keys.extend(walk(value, (*prefix, key)) if is_table else [(*prefix, key)])
        return keys

    assert dataclasses.is_dataclass(JobConfig)
    return walk(config_to_dict(JobConfig()), ())


KNOWN_KEYS = _known_keys()
ANY_VALUE = st.recursive(
    st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    | st.sampled_from([2**63, -(2**63) - 1, 2**64, 2**31, 2**32, 257, 0, -1]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KNOWN_KEYS), ANY_VALUE, max_size=6))
def test_any_values_for_known_keys_build_or_fail_as_config_errors(
    values: dict[tuple[str, ...], Any]
) -> None:
    raw: dict[str, Any] = {}
    for path, value in values.items():
        table = raw
        for part in path[:-1]:
            table = table.setdefault(part, {})
        table[path[-1]] = value
    try:
        config_from_dict(raw)
    except ConfigErrors as err:
        assert err.errors and all(e.key for e in err.errors)


def test_set_values_that_are_not_utf8_are_refused() -> None:
    undecodable = os.fsdecode(b"run-\xff\xfe")  # what argv holds for bytes that are not UTF-8
    done = subprocess.run([sys.executable, "-c", PROBE, "plan", str(QUICKSTART),
                           "--set", f"run.name={undecodable}"],
                          capture_output=True, env=ENV, timeout=60)
    assert done.returncode == 2, done.stderr
    error, probe = done.stderr.decode().splitlines()
    assert error == ('distagent: quickstart.toml (--set): run.name: expected UTF-8 text, '
                     'got "run-\\udcff\\udcfe"')
    assert probe == "TF-ABSENT"

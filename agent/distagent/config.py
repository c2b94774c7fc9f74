"""Reading, overriding, validating and writing the job config.

The TOML file is turned into the frozen dataclasses of `distagent.schema` by one generic
converter driven by the dataclasses' type hints (Literal, tuple, nested dataclasses, unions), so
a field added to the schema is validated without new code here. Every problem is collected and
reported at once, one line each, before anything starts (`ConfigErrors`, exit 2).
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomli_w

from distagent.config_convert import Problem, convert_dataclass, to_plain
from distagent.config_rules import check_rules
from distagent.schema import JobConfig
from distcore.errors import ConfigError, ConfigErrors
from distcore.safefile import write_atomic

RESOLVED_NAME = "config.resolved.toml"


def load_config(path: Path, overrides: Sequence[str] = ()) -> JobConfig:
    """Read `path`, apply `--set key=value` overrides and validate; ConfigErrors on any problem."""
    path = Path(path)
    label = path.name
    raw = _read_toml(path, label)
    problems: list[ConfigError] = []
    override_keys = _apply_overrides(raw, overrides, label, problems)
    return _build(raw, label, override_keys, problems)


def config_from_dict(
    raw: Mapping[str, Any], *, label: str = "<config>", overrides: Sequence[str] = ()
) -> JobConfig:
    """Like `load_config` for a dict already parsed (tests, programmatic use)."""
    data = _deep_copy(raw)
    problems: list[ConfigError] = []
    override_keys = _apply_overrides(data, overrides, label, problems)
    return _build(data, label, override_keys, problems)


def _build(
    raw: dict[str, Any], label: str, override_keys: set[str], problems: list[ConfigError]
) -> JobConfig:
    found: list[Problem] = []
    cfg = convert_dataclass(JobConfig, raw, "", found)
    if isinstance(cfg, JobConfig):
        typed_wrong = {p.key for p in found}
        found.extend(p for p in check_rules(cfg) if p.key not in typed_wrong)
    found.sort(key=lambda p: p.key)
    problems.extend(_located(p, label, override_keys) for p in found)
    if problems:
        raise ConfigErrors(problems)
    assert isinstance(cfg, JobConfig)
    return cfg


def _located(problem: Problem, label: str, override_keys: set[str]) -> ConfigError:
    from_override = any(
        problem.key == k or problem.key.startswith(k + ".") or k.startswith(problem.key + ".")
        for k in override_keys
    )
    return ConfigError(f"{label} (--set)" if from_override else label, problem.key, problem.message)


MAX_CONFIG_BYTES = 1 << 20
"""A job config is a few KiB; anything past 1 MiB is the wrong file (or a hostile one)."""


def _read_toml(path: Path, label: str) -> dict[str, Any]:
    """Parse the file, refusing (one line, before parsing) what cannot be a config: too big,
    not UTF-8, binary, or nested deeper than tomllib's recursion allows."""
    def refuse(message: str, where: str = label) -> ConfigErrors:
        return ConfigErrors([ConfigError(where, "", message)])

    try:
        with path.open("rb") as handle:
            # The size is checked on what is read, not on stat(): a FIFO or /dev/zero has none.
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise refuse("no such file", str(path)) from None
    except IsADirectoryError:
        raise refuse("is a directory, not a TOML file", str(path)) from None
    except OSError as err:
        raise refuse(f"cannot read: {err.strerror or err}", str(path)) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise refuse(f"larger than {MAX_CONFIG_BYTES >> 20} MiB: not a job config")
    if b"\0" in data:
        raise refuse("not a text file (it contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        where = f"byte 0x{data[err.start]:02x} at offset {err.start}"
        raise refuse(f"not UTF-8 text ({where})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise refuse(f"not valid TOML: {err}") from None
    except RecursionError:
        raise refuse("not a job config: values nested too deep") from None


def parse_override_value(text: str) -> Any:
    """A `--set` value is TOML (3, 0.1, true, [28,28,1], "x"); anything else is a plain string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return text


def _apply_overrides(
    raw: dict[str, Any], overrides: Sequence[str], label: str, problems: list[ConfigError]
) -> set[str]:
    keys: set[str] = set()
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            problems.append(ConfigError(f"{label} (--set)", item, "expected KEY=VALUE"))
            continue
        if not _set_dotted(raw, key.split("."), parse_override_value(text.strip())):
            problems.append(ConfigError(f"{label} (--set)", key, "is inside a non-table value"))
            continue
        keys.add(key)
    return keys


def _set_dotted(raw: dict[str, Any], parts: list[str], value: Any) -> bool:
    table = raw
    for part in parts[:-1]:
        child = table.setdefault(part, {})
        if not isinstance(child, dict):
            return False
        table = child
    table[parts[-1]] = value
    return True


def _deep_copy(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in raw.items()}


def config_to_dict(cfg: JobConfig) -> dict[str, Any]:
    """The config as plain TOML/JSON-ready data (tables, lists, scalars)."""
    plain = to_plain(cfg)
    assert isinstance(plain, dict)
    return plain


def write_resolved(cfg: JobConfig, run_dir: Path) -> Path:
    """Write `<run_dir>/config.resolved.toml`: every key, defaults included, as the job ran."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / RESOLVED_NAME
    text = "# The job's config with every default filled in, as distagent resolved it.\n"
    text += dumps_toml(config_to_dict(cfg))
    write_atomic(target, text.encode("utf-8"), mode=0o644)  # a new file, never a link
    return target


def dumps_toml(data: Mapping[str, Any]) -> str:
    """The config as TOML: tomli-w writes every value TOML can hold (-inf, nan, any Unicode)."""
    return tomli_w.dumps(data)


def replace_in(cfg: JobConfig, **changes: Any) -> JobConfig:
    """dataclasses.replace on a dotted path: replace_in(cfg, data__optimize=False)."""
    for dotted, value in changes.items():
        cfg = _replace_path(cfg, dotted.split("__"), value)
    return cfg


def _replace_path(obj: Any, parts: list[str], value: Any) -> Any:
    if len(parts) == 1:
        return dataclasses.replace(obj, **{parts[0]: value})
    child = _replace_path(getattr(obj, parts[0]), parts[1:], value)
    return dataclasses.replace(obj, **{parts[0]: child})

"""The import rules and the entry points, checked in fresh interpreters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from distcore import __version__


def _loaded_modules(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def _top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


DISTCORE_MODULES = [
    "distcore",
    "distcore.names",
    "distcore.snapshot",
    "distcore.errors",
    "distcore.events",
    "distcore.events.watch",
    "distcore.events.jsonify",
]


@pytest.mark.parametrize("module", DISTCORE_MODULES)
def test_distcore_loads_neither_tensorflow_nor_textual(module: str) -> None:
    loaded = _top_level(_loaded_modules(f"import {module}"))
    assert "tensorflow" not in loaded
    assert "textual" not in loaded
    assert "keras" not in loaded


def _all_submodules(package: str) -> list[str]:
    import importlib
    import pkgutil

    pkg = importlib.import_module(package)
    names = [info.name for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}.")]
    # __main__ modules run the CLI when imported.
    return [package] + [n for n in names if not n.endswith("__main__")]


def test_every_distcore_module_is_free_of_tensorflow_and_textual() -> None:
    imports = "\n".join(f"import {m}" for m in _all_submodules("distcore"))
    loaded = _top_level(_loaded_modules(imports))
    assert not {"tensorflow", "textual", "keras"} & loaded


def test_distmon_never_loads_tensorflow() -> None:
    imports = "\n".join(f"import {m}" for m in _all_submodules("distmon"))
    code = imports + "\nimport distmon.cli\ndistmon.cli.build_parser()"
    loaded = _top_level(_loaded_modules(code))
    assert "tensorflow" not in loaded
    assert "keras" not in loaded


def test_distagent_cli_help_does_not_load_tensorflow() -> None:
    loaded = _top_level(_loaded_modules("import distagent.cli\ndistagent.cli.build_parser()"))
    assert "tensorflow" not in loaded


@pytest.mark.parametrize("tool", ["distmon", "distagent"])
def test_version_flag(tool: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", tool, "--version"], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == f"{tool} {__version__}"


@pytest.mark.parametrize("tool", ["distmon", "distagent"])
def test_help_flag(tool: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", tool, "--help"], check=True, capture_output=True, text=True
    ).stdout
    assert "usage:" in out

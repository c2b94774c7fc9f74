"""The import rules and the entry points, checked in fresh interpreters."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

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
    "distcore.tfrecord",
    "distcore.tfrecord.kernel",
    "distcore.profile",
    "distcore.profile.analyze",
    "distcore.profile.worker",
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
    code = imports + "\nimport distmon.flags\ndistmon.flags.build_parser()"
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
    assert out.splitlines()[0] == f"{tool} {__version__}"  # (distmon's next line: its decoder)


@pytest.mark.parametrize("tool", ["distmon", "distagent"])
def test_help_flag(tool: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", tool, "--help"], check=True, capture_output=True, text=True
    ).stdout
    assert "usage:" in out


# --- import contracts ([tool.importlinter] in pyproject.toml) -----------------------------------

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("shared", "agent", "tui")


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the packages under `root`, with the project's contracts."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(root / s) for s in SOURCES)}
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
         "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )


def test_the_import_contracts_hold() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " broken" in result.stdout and "0 broken" in result.stdout


# Each line planted into a copy of the tree breaks one contract, which must say so.
PLANTS = [
    ("shared/distcore/events/store.py", "import distcore.jobs",
     "distcore.events.store -> distcore.jobs"),
    ("shared/distcore/tfrecord/framing.py", "def _late() -> None:\n    import tensorflow",
     "distcore.tfrecord.framing -> tensorflow"),
    ("tui/distmon/render/__init__.py", "import textual", "distmon.render -> textual"),
    ("agent/distagent/cluster/layout.py", "import distagent.train", "distagent.cluster.layout"),
    ("tui/distmon/formats.py", "import distmon.view", "distmon.formats -> distmon.view"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "line", "named"), PLANTS)
def test_a_planted_import_breaks_a_contract(
    tmp_path: Path, path: str, line: str, named: str
) -> None:
    for source in SOURCES:
        shutil.copytree(ROOT / source, tmp_path / source,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    target = tmp_path / path
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert named in result.stdout


@pytest.mark.parametrize(
    ("module", "banned"),
    [
        ("distcore.tfrecord.many", ("distcore.events", "distcore.jobs", "distcore.remote")),
        ("distcore.events.watch", ("distcore.jobs", "distcore.remote")),
    ],
)
def test_layers_in_a_fresh_interpreter(module: str, banned: tuple[str, ...]) -> None:
    loaded = _loaded_modules(f"import {module}")
    assert not {m for m in loaded if any(m == b or m.startswith(f"{b}.") for b in banned)}


# The snapshot types every front end imports, and the packages' own names, stay cheap: the
# decoder's numpy/protobuf/TensorBoard, the watcher's watchdog and the host sampler's psutil come
# only with their users (the dashboard's module loads none of them before its first screen).
@pytest.mark.parametrize(
    "module", ["distcore.events", "distcore.events.snapshots", "distcore.tfrecord",
               "distcore.histograms", "distcore.histograms.records", "distcore.telemetry.samples",
               "distcore.jobs.snapshots", "distmon.app"]
)
def test_model_and_package_imports_are_light(module: str) -> None:
    heavy = {"numpy", "google", "tensorboard", "watchdog", "psutil"}
    assert not heavy & _top_level(_loaded_modules(f"import {module}"))


def test_the_decoder_loads_on_first_use() -> None:
    code = "import distcore.tfrecord as t\nassert t.decode(b'', {}) == (None, 0)"
    assert "numpy" in _top_level(_loaded_modules(code))


# --- distmon: render/ below widgets/ ---------------------------------------------------------

# What the widgets draw is plain data built without Textual (a contract in pyproject.toml says
# so for its imports; this says so for what it loads), so a panel's text is tested without an app.


def test_render_loads_no_textual() -> None:
    modules = [m for m in _all_submodules("distmon.render")]
    loaded = _top_level(_loaded_modules("\n".join(f"import {m}" for m in modules)))
    assert "textual" not in loaded

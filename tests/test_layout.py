"""The import rules and the entry points, checked in fresh interpreters."""

from __future__ import annotations

import ast
import json
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
    "distcore.tfrecord.chunk",
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


# --- import cycles ---------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"distagent": ROOT / "agent", "distcore": ROOT / "shared", "distmon": ROOT / "tui"}
# No cycle may appear in any package (the events package's circle through its __init__ went
# when the decoder became the leaf package distcore.tfrecord).
KNOWN_CYCLES: dict[str, list[set[str]]] = {}


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The modules one statement imports, lazy ones included (a function-level import and
    `importlib.import_module("literal")` close a circle just as well at run time)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        return [base, *(f"{base}.{alias.name}" for alias in node.names)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


def imports(package: str, root: Path) -> dict[str, set[str]]:
    """Each module of the package and every name it imports (other packages' too)."""
    files = {_module_name(p, root): p for p in (root / package).rglob("*.py")}
    found: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        names = {m for node in ast.walk(tree) for m in _imported(node, module, is_package)}
        found[module] = names - {module}
    return found


def import_graph(package: str, root: Path) -> dict[str, set[str]]:
    found = imports(package, root)
    return {module: {m for m in names if m in found} for module, names in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [{"a", "b", "c"}]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "a"}}, [{"a", "b"}, {"c", "d"}]),
    ],
)
def test_cycles_finds_circles(graph: dict[str, set[str]], expected: list[set[str]]) -> None:
    assert sorted(map(sorted, cycles(graph))) == sorted(map(sorted, expected))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycles(package: str) -> None:
    found = cycles(import_graph(package, PACKAGES[package]))
    assert [c for c in found if c not in KNOWN_CYCLES.get(package, [])] == [], found


def package_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The module graph folded onto the package's subpackages: an edge from the subpackage of
    each importer to that of each module it imports (a module directly in `package` is a node
    of its own); none from a subpackage to itself."""
    subs = {m for m in graph if m.count(".") == 1 and any(n.startswith(f"{m}.") for n in graph)}

    def node(module: str) -> str:
        top = ".".join(module.split(".")[:2])
        return top if top in subs else module

    folded: dict[str, set[str]] = {node(m): set() for m in graph if m != package}
    for module, deps in graph.items():
        if module != package:  # (the package's __init__ re-exports what is below it)
            folded[node(module)] |= {node(d) for d in deps if d != package} - {node(module)}
    return folded


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"p": set(), "p.a": set(), "p.a.x": {"p.b.y"}, "p.b": set(), "p.b.y": {"p.a"}},
         [{"p.a", "p.b"}]),
        ({"p": set(), "p.a": set(), "p.a.x": {"p.b.y", "p.a.z"}, "p.a.z": {"p.a.x"},
          "p.b": set(), "p.b.y": {"p.names"}, "p.names": set()}, []),
        ({"p": set(), "p.a": set(), "p.a.x": {"p.names"}, "p.names": {"p.a.x"}},
         [{"p.a", "p.names"}]),
    ],
)
def test_package_graph_finds_circles_between_subpackages(
    graph: dict[str, set[str]], expected: list[set[str]]
) -> None:
    found = cycles(package_graph(graph, "p"))
    assert sorted(map(sorted, found)) == sorted(map(sorted, expected))


def test_no_import_circle_between_distcore_packages() -> None:
    """A module circle may pass through several packages without a cycle of modules (events
    imports histograms, which imports a helper of events): each package must sit above or
    below each other one, lazy and type-only imports counted."""
    folded = package_graph(import_graph("distcore", PACKAGES["distcore"]), "distcore")
    assert cycles(folded) == []


# --- layers: tfrecord <- events <- jobs <- front ends -----------------------------------------

# Each layer and what it may never import (lazily neither): the decoder is a leaf, the reader
# knows nothing of jobs or of where remote bytes come from, and distcore nothing of its users.
LAYERS = {
    "distcore.histograms": ("distcore.tfrecord", "distcore.events", "distcore.jobs",
                            "distcore.remote", "distcore.telemetry", "distmon", "distagent"),
    "distcore.telemetry": ("distcore.tfrecord", "distcore.events", "distcore.histograms",
                           "distcore.jobs", "distcore.remote", "distmon", "distagent"),
    "distcore.alerts": ("distcore.jobs", "distcore.remote", "distmon", "distagent"),
    "distcore.webhook": ("distcore.tfrecord", "distcore.events", "distcore.histograms",
                         "distcore.telemetry", "distcore.jobs", "distcore.remote", "distmon",
                         "distagent"),
    "distcore.profile": ("distcore.tfrecord", "distcore.events", "distcore.histograms",
                         "distcore.telemetry", "distcore.jobs", "distcore.remote", "distmon",
                         "distagent"),
    "distcore.tfrecord": ("distcore.events", "distcore.jobs", "distcore.remote",
                          "distcore.telemetry", "distmon", "distagent"),
    "distcore.events": ("distcore.jobs", "distcore.remote", "distmon", "distagent"),
    "distcore.jobs": ("distmon", "distagent"),
    "distcore": ("distmon", "distagent"),
}
# (importer, imported) pairs that may cross a layer, each with its reason: none since a run's
# place became a RunLocation (events/jsonify no longer asks remote to decode `host:/path`).
KNOWN_CROSSINGS: set[tuple[str, str]] = set()


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def layer_crossings(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {
        (module, dep)
        for module, deps in graph.items()
        for layer, banned in LAYERS.items()
        if _within(module, layer)
        for dep in deps
        if any(_within(dep, b) for b in banned)
    }


def test_layers_import_downwards_only() -> None:
    crossings = layer_crossings(imports("distcore", PACKAGES["distcore"]))
    known = {(a, m) for a, b in crossings for k, m in KNOWN_CROSSINGS if a == k and _within(b, m)}
    unknown = {(a, b) for a, b in crossings if not any(_within(b, m) for k, m in known if a == k)}
    assert unknown == set()
    assert known == KNOWN_CROSSINGS, "a known crossing went: drop it from the list"


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"distcore.tfrecord.batch": {"distcore.events.snapshots"}},
         {("distcore.tfrecord.batch", "distcore.events.snapshots")}),
        ({"distcore.events.watch": {"distcore.jobs.snapshots", "distcore.tfrecord"}},
         {("distcore.events.watch", "distcore.jobs.snapshots")}),
        ({"distcore.jobs.index": {"distcore.events.store", "distcore.tfrecord"}}, set()),
        ({"distcore.jobs.index": {"distmon.app"}}, {("distcore.jobs.index", "distmon.app")}),
        ({"distcore.eventsx": {"distcore.jobs"}}, set()),  # a name prefix is not the package
    ],
)
def test_layer_crossings_finds_upward_imports(
    graph: dict[str, set[str]], expected: set[tuple[str, str]]
) -> None:
    assert layer_crossings(graph) == expected


@pytest.mark.parametrize(
    ("module", "banned"),
    [
        ("distcore.tfrecord.chunk", ("distcore.events", "distcore.jobs", "distcore.remote")),
        ("distcore.events.watch", ("distcore.jobs", "distcore.remote")),
    ],
)
def test_layers_in_a_fresh_interpreter(module: str, banned: tuple[str, ...]) -> None:
    loaded = _loaded_modules(f"import {module}")
    assert not {m for m in loaded if any(_within(m, b) for b in banned)}


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

# What the widgets draw is plain data built without Textual; the widgets and the app that show
# it sit above, so a panel's text is tested without an app and no drawing rule needs a widget.
RENDER_BANNED = ("textual", "distmon.widgets", "distmon.app", "distmon.board", "distmon.dashboard")


def test_render_imports_no_widget_and_no_textual() -> None:
    found = imports("distmon", PACKAGES["distmon"])
    crossings = {
        (module, dep)
        for module, deps in found.items()
        if _within(module, "distmon.render")
        for dep in deps
        if any(_within(dep, banned) for banned in RENDER_BANNED)
    }
    assert crossings == set()


def test_render_loads_no_textual() -> None:
    modules = [m for m in _all_submodules("distmon.render")]
    loaded = _top_level(_loaded_modules("\n".join(f"import {m}" for m in modules)))
    assert "textual" not in loaded

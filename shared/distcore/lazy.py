"""A package's names loaded on first use (PEP 562), so that importing one light submodule
does not import its heavy siblings (numpy, protobuf, psutil): one rule for every package that
exports names this way."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """The package's module `__getattr__`: `table` maps each exported name to the submodule
    that defines it, imported the first time the name is asked for."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__

"""opennua: a durable runtime for long-running AI agents."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__version__ = "0.1.0"


def exports_on_demand(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for a package whose public names load on first use
    (PEP 562): `where` maps each name to the private submodule that defines it. A process
    that needs one light name does not import the package's heavy parts with it."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__

"""Finding user tools: the ``[tools] modules`` of the config and the ``awaken_stdio.tools`` entry points.

An entry point may name a module (every top-level ``Tool`` in it, ``@tool`` functions included), a single tool,
a list of tools, or a function returning tools. Each package is imported only when the runtime is built.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.tools import Tool

__all__ = ["ENTRY_POINT_GROUP", "tools_from_entry_points", "tools_from_module", "tools_in"]

ENTRY_POINT_GROUP = "awaken_stdio.tools"
log = logging.getLogger(__name__)


def tools_in(value: Any, source: str) -> list[Tool]:
    """The tools ``value`` stands for: a module's top-level tools, a tool, an iterable, or a factory's result."""
    if isinstance(value, ModuleType):
        return [v for v in vars(value).values() if isinstance(v, Tool)]
    if isinstance(value, Tool):
        return [value]
    if callable(value):
        return tools_in(value(), source)
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        items = list(value)
        if all(isinstance(v, Tool) for v in items):
            return items
    raise ConfigError(f"{source} is not a tool, a list of tools, a module or a function returning tools")


def tools_from_module(name: str) -> list[Tool]:
    """Every ``Tool`` (``@tool`` functions included) defined at the top level of module ``name``."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"tools.modules: cannot import {name!r}: {exc}") from exc
    return tools_in(module, f"module {name!r}")


def tools_from_entry_points(points: Iterable[EntryPoint] | None = None) -> list[Tool]:
    """The tools of every installed package's ``awaken_stdio.tools`` entry points.

    A package that fails to load is logged and skipped: one broken plugin must not take the agent down.
    """
    found: list[Tool] = []
    for point in entry_points(group=ENTRY_POINT_GROUP) if points is None else points:
        try:
            found.extend(tools_in(point.load(), f"entry point {point.name!r} ({point.value})"))
        except Exception as exc:
            log.error("skipping the tools of entry point %s (%s): %s", point.name, point.value, exc)
    return found

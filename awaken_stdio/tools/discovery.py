"""Finding user tools: the ``[tools] modules`` of the config and the ``awaken_stdio.tools`` entry points.

An entry point may name a module (every top-level ``Tool`` in it, ``@tool`` functions included), a single tool,
a list of tools, or a function returning tools. Each package is imported only when the runtime is built. A server
imports its modules with :func:`import_tools`, in a daemon thread: an import that never returns holds neither the
event loop nor the process's exit.

A ``[tools] modules`` name is looked for beside the config file, then in the current directory, then on
``sys.path``: a ``my_tools.py`` next to ``config.toml`` works without ``PYTHONPATH``, whatever directory the editor
starts us in.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterable
from importlib.machinery import PathFinder
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.tools import Tool

__all__ = ["ENTRY_POINT_GROUP", "import_tools", "tools_from_entry_points", "tools_from_module", "tools_in"]

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


def tools_from_module(name: str, config_dir: Path | None = None) -> list[Tool]:
    """Every ``Tool`` (``@tool`` functions included) defined at the top level of module ``name``.

    The module is looked for in ``config_dir`` (the config file's directory), then the current directory, then
    ``sys.path``; the directory it is found in joins ``sys.path`` so that it can import its siblings.
    """
    _add_home_of(name, [d for d in (config_dir, Path.cwd()) if d is not None])
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"tools.modules: cannot import {name!r}: {exc}") from exc
    except Exception as exc:  # the module's own code failed: still a problem of the configuration, not ours
        raise _import_failed(name, exc) from exc
    return tools_in(module, f"module {name!r}")


async def import_tools(name: str, config_dir: Path | None = None) -> list[Tool]:
    """:func:`tools_from_module` off the event loop (``_off_loop.py``): a cancelled caller leaves an import that
    never returns behind, and it holds neither the loop nor the process's exit."""
    from awaken_stdio.tools._off_loop import off_loop

    try:
        return await off_loop(lambda: tools_from_module(name, config_dir), f"import {name}")
    except ConfigError:
        raise
    except Exception as exc:  # SystemExit and the like, told as such by off_loop
        raise _import_failed(name, exc) from exc


def _import_failed(name: str, exc: BaseException) -> ConfigError:
    return ConfigError(f"tools.modules: importing {name!r} failed: {type(exc).__name__}: {exc}")


def _add_home_of(name: str, directories: list[Path]) -> None:
    """Put the first of ``directories`` holding ``name``'s top-level package at the front of ``sys.path``."""
    top = name.partition(".")[0]
    if top in sys.modules:
        return
    for directory in directories:
        home = str(directory.resolve())
        if PathFinder.find_spec(top, [home]) is not None:
            if sys.path[:1] != [home]:
                sys.path.insert(0, home)
            return


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

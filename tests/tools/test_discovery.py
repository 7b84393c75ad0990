"""User tools found by module name and through the ``awaken_stdio.tools`` entry points of installed packages."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint

import pytest

from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.tools import tool
from awaken_stdio.tools.discovery import ENTRY_POINT_GROUP, tools_from_entry_points, tools_from_module, tools_in


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


def test_a_module_yields_its_top_level_tools() -> None:
    assert {t.name for t in tools_from_module("awaken_weather")} == {"forecast", "compare"}


def test_an_unimportable_module_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot import 'no_such_module_here'"):
        tools_from_module("no_such_module_here")


def test_the_installed_example_package_is_found_by_its_entry_point() -> None:
    assert {"forecast", "compare"} <= {t.name for t in tools_from_entry_points()}


def test_entry_points_may_name_a_tool_a_list_or_a_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fake_tools")
    module.single = ping  # type: ignore[attr-defined]
    module.several = [ping]  # type: ignore[attr-defined]
    module.factory = lambda: [ping]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_tools", module)
    points = [EntryPoint(n, f"fake_tools:{n}", ENTRY_POINT_GROUP) for n in ("single", "several", "factory")]
    assert [t.name for t in tools_from_entry_points(points)] == ["ping", "ping", "ping"]


def test_a_broken_entry_point_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    points = [EntryPoint("broken", "no_such_package_xyz", ENTRY_POINT_GROUP), EntryPoint("ok", "awaken_weather", "g")]
    assert {t.name for t in tools_from_entry_points(points)} == {"forecast", "compare"}
    assert "skipping the tools of entry point broken" in caplog.text


def test_something_that_is_not_a_tool_is_refused() -> None:
    with pytest.raises(ConfigError, match="is not a tool"):
        tools_in(42, "entry point 'x'")

"""User tools found by module name and through the ``awaken_stdio.tools`` entry points of installed packages."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from importlib.metadata import EntryPoint
from pathlib import Path

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


def _module(directory: Path, name: str, tool_name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.py").write_text(
        f"from awaken_stdio import tool\n\n@tool\ndef {tool_name}() -> str:\n    '''Answer.'''\n    return 'x'\n"
    )


def test_a_module_beside_the_config_comes_before_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path / "config", "h4_beside_tools", "from_config_dir")
    _module(tmp_path / "cwd", "h4_beside_tools", "from_cwd")
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "h4_beside_tools", raising=False)
    assert [t.name for t in tools_from_module("h4_beside_tools", tmp_path / "config")] == ["from_config_dir"]


def test_a_module_in_the_cwd_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, "h4_cwd_tools", "from_cwd")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "h4_cwd_tools", raising=False)
    assert [t.name for t in tools_from_module("h4_cwd_tools", tmp_path / "elsewhere")] == ["from_cwd"]


def test_a_module_that_fails_on_import_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "h4_broken_tools.py").write_text("raise RuntimeError('no token')\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(ConfigError, match="importing 'h4_broken_tools' failed: RuntimeError: no token"):
        tools_from_module("h4_broken_tools", tmp_path)


def test_the_cli_finds_a_module_beside_its_config_without_pythonpath(tmp_path: Path) -> None:
    _module(tmp_path / "conf", "h4_cli_tools", "beside_the_config")
    (tmp_path / "conf" / "config.toml").write_text('[tools]\nmodules = ["h4_cli_tools"]\nbuiltin = false\n')
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-m", "awaken_stdio", "tools", "list", "--config", str(tmp_path / "conf" / "config.toml")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # not the config's directory
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "beside_the_config" in out.stdout

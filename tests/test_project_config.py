"""A project's own config: the nearest ``.awaken-stdio.toml`` from the working directory upward, used instead of the
user config file (``--config`` and ``$AWAKEN_STDIO_CONFIG`` still come first), shown by ``doctor``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from awaken_stdio.app.config_file import PROJECT_CONFIG, project_config

ROOT = Path(__file__).parent.parent
SCRIPTED = '[models.{0}]\nprovider = "scripted"\nscript = "{0}.json"\n'


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """A project with its config at its root and a nested directory to start in; a user config naming another
    model (in ``tmp_path/xdg``)."""
    project = tmp_path / "project"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    (project / PROJECT_CONFIG).write_text(SCRIPTED.format("local"))
    (project / "local.json").write_text('{"turns": [{"text": "hi"}]}')  # relative to the project file
    user = tmp_path / "xdg" / "awaken-stdio"
    user.mkdir(parents=True)
    (user / "config.toml").write_text(SCRIPTED.format("mine"))
    (user / "mine.json").write_text('{"turns": [{"text": "hi"}]}')
    return project, deep


def doctor(cwd: Path, tmp_path: Path, **env: str) -> list[str]:
    drop = ("AWAKEN_STDIO_CONFIG", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    environ = {k: v for k, v in os.environ.items() if k not in drop}
    environ |= {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PYTHONPATH": str(ROOT), **env}
    command = [sys.executable, "-m", "awaken_stdio", "doctor", "--store", "memory://"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, env=environ, cwd=cwd, check=False)
    return [line.strip() for line in out.stdout.splitlines()]


def test_the_nearest_project_file_is_used_instead_of_the_user_config(tmp_path: Path) -> None:
    project, deep = _project(tmp_path)
    lines = doctor(deep, tmp_path)
    assert f"ok    config: {project / PROJECT_CONFIG}" in lines
    assert f"project config file ({PROJECT_CONFIG} in {deep} or above): {project / PROJECT_CONFIG} (used)" in lines
    user = next(line for line in lines if line.startswith("user config file: "))
    assert user.endswith(f"(not read: project config file ({PROJECT_CONFIG} in {deep} or above) comes first)")
    assert "ok    model local: scripted, 1 turn" in lines  # its script, relative to the project file
    assert not any("model mine" in line for line in lines)


def test_outside_any_project_the_user_config_is_used(tmp_path: Path) -> None:
    _project(tmp_path)
    lines = doctor(tmp_path, tmp_path)
    assert f"project config file ({PROJECT_CONFIG} in {tmp_path} or above): none found" in lines
    assert "ok    model mine: scripted, 1 turn" in lines


def test_an_explicit_config_comes_before_the_project_file(tmp_path: Path) -> None:
    project, deep = _project(tmp_path)
    explicit = tmp_path / "xdg" / "awaken-stdio" / "config.toml"
    lines = doctor(deep, tmp_path, AWAKEN_STDIO_CONFIG=str(explicit))
    assert f"ok    config: {explicit}" in lines
    shown = f"{project / PROJECT_CONFIG} (not read: $AWAKEN_STDIO_CONFIG comes first)"
    assert f"project config file ({PROJECT_CONFIG} in {deep} or above): {shown}" in lines


def test_the_nearest_of_nested_project_files_wins(tmp_path: Path) -> None:
    inner = tmp_path / "outer" / "inner"
    (inner / "deeper").mkdir(parents=True)
    (tmp_path / "outer" / PROJECT_CONFIG).write_text("")
    (inner / PROJECT_CONFIG).write_text("")
    assert project_config(inner / "deeper") == inner / PROJECT_CONFIG
    assert project_config(tmp_path) is None

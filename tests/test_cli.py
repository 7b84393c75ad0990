"""The command line as a user runs it: real processes, exit codes, stdout vs stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.providers.scripted import ScriptedModel
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.stores import open_store


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "awaken_stdio", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_help_lists_the_commands() -> None:
    out = cli("--help")
    assert out.returncode == 0
    for command in ("runs", "sessions", "tools", "config"):
        assert command in out.stdout


def test_config_schema_prints_json() -> None:
    out = cli("config", "schema")
    assert out.returncode == 0
    assert json.loads(out.stdout)["title"] == "Config"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("runs", "list", "--config", "/nonexistent.toml"), "config file not found"),
        (("runs", "list", "--store", "bogus"), "store URL"),
        (("runs", "list", "--store", "sqlite://relative.db"), "absolute"),
    ],
)
def test_usage_errors_exit_2_with_one_line_and_no_stdout(args: tuple[str, ...], message: str) -> None:
    out = cli(*args)
    assert out.returncode == 2
    assert out.stdout == ""
    assert message in out.stderr.strip().splitlines()[-1]


@pytest.mark.anyio
async def test_runs_list_and_show_read_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/awaken.db"
    async with open_store(url) as store:
        runtime = AgentRuntime(
            agents=[AgentSpec("a", model="m")], models={"m": ScriptedModel({"turns": [{"text": "ok"}]})}, store=store
        )
        result = await runtime.run_to_completion("hello")
    listed = cli("runs", "list", "--json", "--store", url)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [r["run_id"] for r in runs] == [result.run_id]
    assert runs[0]["status"] == "completed"
    assert set(runs[0]) == {
        "run_id",
        "thread_id",
        "session_id",
        "agent_id",
        "status",
        "created_at",
        "updated_at",
        "pending",
    }
    shown = cli("runs", "show", result.run_id, "--store", url)
    assert shown.returncode == 0 and "completed" in shown.stdout
    missing = cli("runs", "show", "nope", "--store", url)
    assert missing.returncode == 2 and "run nope" in missing.stderr

"""``runs show`` and ``runs approve`` of a run whose file changed after its diff was shown: the stale diff is not
printed as if current, and the approval does not write over the change; the run waits again with the new diff."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.preview import CHANGED
from awaken_stdio.providers.scripted import ScriptedModel
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.runtime.permission import PermissionPlugin
from awaken_stdio.stores import open_store
from awaken_stdio.tools.builtin import builtin_tools

pytestmark = pytest.mark.anyio
WRITE = {"name": "write_file", "arguments": {"path": "x.txt", "content": "B\n"}}
SCRIPT = {"turns": [{"tool_calls": [WRITE]}, {"text": "ok"}]}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "awaken_stdio", *args], capture_output=True, text=True, timeout=60)


async def waiting_run(url: str, cwd: Path) -> str:
    """A run waiting for approval of ``write_file x.txt`` (its diff shown on the file as it is now)."""
    async with open_store(url) as store:
        runtime = AgentRuntime(
            agents=[AgentSpec(id="a", model="m")],
            models={"m": ScriptedModel(SCRIPT)},
            tools=builtin_tools(),
            plugins=[PermissionPlugin(store)],
            store=store,
        )
        result = await runtime.run_to_completion(
            RunActivation(messages=[Message.user("write it")], env=RunEnvironment(cwd=str(cwd)))
        )
    assert result.status == "waiting"
    return result.run_id


async def test_a_file_changed_after_its_diff_was_shown_is_asked_again_not_overwritten(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/awaken.db"
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    config = tmp_path / "config.toml"  # the CLI resumes the run itself: it needs the agent
    config.write_text('[models.m]\nprovider = "scripted"\nscript = "script.json"\n[agents.a]\nmodel = "m"\n')
    target = tmp_path / "x.txt"
    target.write_text("A\n")
    run_id = await waiting_run(url, tmp_path)
    target.write_text("C\n")  # the person edits the file after the diff A -> B was shown

    shown = cli("runs", "show", run_id, "--store", url)
    assert shown.returncode == 0, shown.stderr
    assert "stale: x.txt changed since this diff was shown; approving will ask again" in shown.stdout
    assert "-A" not in shown.stdout  # the old diff is not printed as if current
    (pending,) = json.loads(cli("runs", "show", run_id, "--json", "--store", url).stdout)["pending"]
    assert pending["preview"]["stale"].startswith("x.txt changed since this diff was shown")

    approved = cli("runs", "approve", run_id, "--store", url, "--config", str(config))
    assert approved.returncode == 2 and approved.stdout == ""
    (line,) = approved.stderr.strip().splitlines()
    assert line == f"awaken-stdio: error: run {run_id} waits again for {pending['tool_call_id']}: {CHANGED}"
    assert target.read_text() == "C\n"  # nothing written over the change

    shown = cli("runs", "show", run_id, "--store", url)  # the question as it stands now: C -> B
    assert "stale" not in shown.stdout and "-C" in shown.stdout and "+B" in shown.stdout and CHANGED in shown.stdout
    again = cli("runs", "approve", run_id, "--store", url, "--config", str(config))
    assert again.returncode == 0, again.stderr
    assert f"run {run_id} is completed" in again.stdout
    assert target.read_text() == "B\n"

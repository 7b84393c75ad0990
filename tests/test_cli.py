"""The command line as a user runs it: real processes, exit codes, stdout vs stderr."""

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
            agents=[AgentSpec(id="a", model="m")], models={"m": ScriptedModel({"turns": [{"text": "ok"}]})}, store=store
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


WRITE_SCRIPT = {
    "turns": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
        {"text": "ok"},
    ]
}


async def _waiting_runs(url: str, cwd: Path, n: int) -> list[str]:
    """``n`` runs on their own threads, each waiting for approval of a file write (permission default: ask)."""
    from awaken_stdio.runtime.permission import PermissionPlugin
    from awaken_stdio.tools.builtin import builtin_tools

    async with open_store(url) as store:
        runtime = AgentRuntime(
            agents=[AgentSpec(id="a", model="m")],
            models={"m": ScriptedModel(WRITE_SCRIPT)},
            tools=builtin_tools(),
            plugins=[PermissionPlugin(store)],
            store=store,
        )
        runs = [
            await runtime.run_to_completion(
                RunActivation(messages=[Message.user("write it")], env=RunEnvironment(cwd=str(cwd)))
            )
            for _ in range(n)
        ]
        return [r.run_id for r in runs]


@pytest.mark.anyio
async def test_runs_reject_and_cancel_answer_waiting_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/awaken.db"
    rejected, cancelled = await _waiting_runs(url, tmp_path, 2)
    (tmp_path / "script.json").write_text(json.dumps(WRITE_SCRIPT))
    config = tmp_path / "config.toml"  # the CLI resumes the run itself: it needs the agent
    config.write_text('[models.m]\nprovider = "scripted"\nscript = "script.json"\n[agents.a]\nmodel = "m"\n')
    waiting = json.loads(cli("runs", "list", "--status", "waiting", "--json", "--store", url).stdout)
    assert {r["run_id"] for r in waiting} == {rejected, cancelled}
    assert waiting[0]["pending"][0]["tool"] == "write_file"

    done = cli("runs", "reject", rejected, "--reason", "not now", "--store", url, "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert cli("runs", "cancel", cancelled, "--store", url, "--config", str(config)).returncode == 0

    statuses = {r["run_id"]: r["status"] for r in json.loads(cli("runs", "list", "--json", "--store", url).stdout)}
    assert statuses == {rejected: "completed", cancelled: "cancelled"}
    assert not (tmp_path / "x.txt").exists()
    again = cli("runs", "approve", rejected, "--store", url, "--config", str(config))
    assert again.returncode == 2 and again.stdout == ""


@pytest.mark.anyio
async def test_approving_a_run_that_waits_for_no_call_says_what_it_waits_for(tmp_path: Path) -> None:
    """A run waiting for its MCP client's model (a 2026-07-28 round) has nothing to approve: the CLI says so and how
    to end it, instead of "no such call: None"."""
    from awaken_stdio.contract.errors import ModelAnswerPending
    from awaken_stdio.providers.scripted import FunctionModel

    def asks(request: object, turn: int) -> dict[str, str]:
        raise ModelAnswerPending("waiting for the MCP client's model to answer")

    url = f"sqlite:///{tmp_path}/awaken.db"
    async with open_store(url) as store:
        runtime = AgentRuntime(agents=[AgentSpec(id="a", model="m")], models={"m": FunctionModel(asks)}, store=store)
        waiting = await runtime.run_to_completion(RunActivation(messages=[Message.user("hi")]))
    assert waiting.status == "waiting"

    out = cli("runs", "approve", waiting.run_id, "--store", url)
    assert out.returncode == 2 and out.stdout == ""
    assert "waits for no tool call (waiting for the MCP client's model to answer)" in out.stderr
    assert f"awaken-stdio runs cancel {waiting.run_id}" in out.stderr


@pytest.mark.anyio
async def test_runs_show_prints_what_approving_would_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/awaken.db"
    (tmp_path / "x.txt").write_text("old\n")
    (run_id,) = await _waiting_runs(url, tmp_path, 1)
    shown = cli("runs", "show", run_id, "--store", url)
    assert shown.returncode == 0, shown.stderr
    assert "--- a/x.txt" in shown.stdout and "-old" in shown.stdout and "+x" in shown.stdout
    pending = json.loads(cli("runs", "show", run_id, "--json", "--store", url).stdout)["pending"]
    change = {"path": str(tmp_path / "x.txt"), "old_text": "old\n", "new_text": "x"}
    assert pending[0]["preview"] == {"changes": [change], "cwd": str(tmp_path)}


@pytest.mark.anyio
async def test_sessions_list_show_and_delete(tmp_path: Path) -> None:
    from awaken_stdio.contract.stores import SessionRecord

    url = f"sqlite:///{tmp_path}/awaken.db"
    async with open_store(url) as store:
        runtime = AgentRuntime(
            agents=[AgentSpec(id="a", model="m")],
            models={"m": ScriptedModel({"turns": [{"text": "hi there"}]})},
            store=store,
        )
        result = await runtime.run_to_completion("hello")
        await store.save_session(
            SessionRecord(session_id="sess_1", thread_id=result.thread_id, cwd=str(tmp_path), title="Greeting")
        )

    listed = json.loads(cli("sessions", "list", "--json", "--cwd", str(tmp_path), "--store", url).stdout)
    assert [(s["session_id"], s["title"], s["cwd"]) for s in listed] == [("sess_1", "Greeting", str(tmp_path))]
    shown = cli("sessions", "show", "sess_1", "--store", url)
    assert "[user] hello" in shown.stdout and "[assistant] hi there" in shown.stdout
    assert cli("sessions", "delete", "sess_1", "--store", url).returncode == 0
    assert json.loads(cli("sessions", "list", "--json", "--store", url).stdout) == []
    missing = cli("sessions", "show", "sess_1", "--store", url)
    assert missing.returncode == 2 and "session sess_1" in missing.stderr


@pytest.mark.anyio
async def test_global_options_work_before_and_after_the_subcommand(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/awaken.db"
    async with open_store(url) as store:
        runtime = AgentRuntime(
            agents=[AgentSpec(id="a", model="m")], models={"m": ScriptedModel({"turns": [{"text": "ok"}]})}, store=store
        )
        run_id = (await runtime.run_to_completion("hello")).run_id
    for args in (
        ("runs", "--store", url, "list", "--json"),  # the group's option: silently ignored before
        ("--store", url, "runs", "list", "--json"),
        ("runs", "list", "--json", "--store", url),
        ("--store", "memory://", "runs", "list", "--json", "--store", url),  # the innermost wins
    ):
        out = cli(*args)
        assert out.returncode == 0, out.stderr
        assert [r["run_id"] for r in json.loads(out.stdout)] == [run_id], args
    missing = cli("runs", "--config", str(tmp_path / "nope.toml"), "list")
    assert missing.returncode == 2 and "config file not found" in missing.stderr


@pytest.mark.anyio
async def test_run_and_session_ids_accept_a_unique_prefix(tmp_path: Path) -> None:
    from awaken_stdio.contract.stores import SessionRecord

    url = f"sqlite:///{tmp_path}/awaken.db"
    async with open_store(url) as store:
        runtime = AgentRuntime(
            agents=[AgentSpec(id="a", model="m")],
            models={"m": ScriptedModel({"turns": [{"text": "ok"}, {"text": "ok"}]})},
            store=store,
        )
        first, second = [(await runtime.run_to_completion("hello")).run_id for _ in range(2)]
        for session_id in ("sess_abc1", "sess_abd2"):
            await store.save_session(
                SessionRecord(session_id=session_id, thread_id=f"t_{session_id}", cwd=str(tmp_path))
            )
    common = next(i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)  # shared prefix

    shown = cli("runs", "show", first[: common + 1], "--json", "--store", url)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_id"] == first
    ambiguous = cli("runs", "show", first[:common], "--store", url)
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert "ambiguous" in ambiguous.stderr and first in ambiguous.stderr and second in ambiguous.stderr

    assert "session_id  sess_abc1" in cli("sessions", "show", "sess_abc", "--store", url).stdout
    assert cli("sessions", "show", "sess_ab", "--store", url).returncode == 2
    assert "session nope" in cli("sessions", "show", "nope", "--store", url).stderr


def test_version() -> None:
    from awaken_stdio import __version__

    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"awaken-stdio {__version__}"


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete "), ("zsh", "#compdef"), ("fish", "complete -c")])
def test_completion_prints_a_script_for_each_shell(shell: str, marker: str) -> None:
    out = cli("completion", shell)
    assert out.returncode == 0, out.stderr
    assert marker in out.stdout and "awaken-stdio" in out.stdout and "approve" in out.stdout


def test_shtab_is_imported_only_by_the_completion_command() -> None:
    code = "import sys; from awaken_stdio.cli import main; main(['config', 'example']); print('shtab' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.splitlines()[-1] == "False"


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    import sqlite3

    url = f"sqlite:///{tmp_path}/awaken.db"
    assert cli("sessions", "list", "--store", url).returncode == 0  # creates the schema
    with sqlite3.connect(tmp_path / "awaken.db") as db:  # a row no version of us wrote: its body is not JSON
        db.execute("INSERT INTO sessions VALUES ('sess_x', 't', '/tmp', 1, 'not json')")
    out = cli("sessions", "list", "--store", url)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "awaken-stdio: error: unexpected JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
        " (run again with --debug for the traceback)"
    ]
    debug = cli("sessions", "list", "--store", url, "--debug")
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr

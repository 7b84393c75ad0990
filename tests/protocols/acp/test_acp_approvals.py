"""An approved call behaves exactly like an allowed one, wherever and however it was approved (issue: approvals).

The matrix {editor fs read, editor fs write, editor terminal, a write in an additional directory, a session MCP tool}
x {allowed by a rule, approved live, approved after kill -9 + ``session/load``, approved by ``runs approve`` while the
ACP process lives, approved by ``runs approve`` with no ACP process}: every cell drives the real agent process with
the official ACP SDK client and a real ``awaken-stdio runs approve`` process on the same SQLite store. With an
editor alive the call goes through it (its buffers, its terminal); with none, it runs locally with the session's
recorded roots and its MCP servers started from their recorded specs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block
from acp.schema import McpServerStdio

from awaken_stdio.contract.messages import text_of
from awaken_stdio.stores import open_store

from .conftest import ROOT, Agent, Harness

pytestmark = pytest.mark.anyio

MCP_SERVER = ROOT / "tests" / "tools" / "mcp_servers" / "server.py"
EDITOR_TEXT = "from the editor's buffer"
DISK_TEXT = "from the disk"


@dataclass(frozen=True)
class Row:
    """One capability a call needs from its session."""

    call: dict[str, Any]
    fs: bool = False
    terminal: bool = False
    extra_dir: bool = False
    mcp: bool = False
    tool: str = ""
    notes: dict[str, Any] = field(default_factory=dict)


def rows(world: Path) -> dict[str, Row]:
    extra = world / "extra"
    return {
        "fs_read": Row({"name": "read_file", "arguments": {"path": "notes.txt"}}, fs=True, tool="read_file"),
        "fs_write": Row(
            {"name": "write_file", "arguments": {"path": "out.txt", "content": "approved"}}, fs=True, tool="write_file"
        ),
        "terminal": Row(
            {"name": "run_command", "arguments": {"command": "echo ran > ran.txt"}}, terminal=True, tool="run_command"
        ),
        "extra_dir": Row(
            {"name": "write_file", "arguments": {"path": str(extra / "a.txt"), "content": "in"}},
            extra_dir=True,
            tool="write_file",
        ),
        "mcp": Row({"name": "mini__echo", "arguments": {"text": "hey"}}, mcp=True, tool="mini__echo"),
    }


ROWS = ["fs_read", "fs_write", "terminal", "extra_dir", "mcp"]
COLUMNS = ["allowed", "live", "after_kill_and_load", "cli_while_acp_lives", "cli_without_acp"]


def approve(harness: Harness, run_id: str) -> subprocess.CompletedProcess[str]:
    """A real ``awaken-stdio runs approve`` process on the harness's config and store."""
    assert harness.config is not None
    command = [sys.executable, "-m", "awaken_stdio", "runs", "approve", run_id]
    command += ["--config", str(harness.config), "--store", harness.store]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)


async def stored_result(harness: Harness, session_id: str) -> str:
    """The text of the session's last tool result, as stored."""
    async with open_store(harness.store) as store:
        session = await store.load_session(session_id)
        assert session is not None
        loaded = await store.load_thread(session.thread_id)
    assert loaded is not None
    tool_messages = [m for m in loaded.messages if m.role == "tool" and not m.internal]
    assert tool_messages, "the call never produced a result"
    return text_of(tool_messages[-1].content)


class Cell:
    def __init__(self, harness: Harness, tmp_path: Path, row: str, column: str) -> None:
        self.harness, self.column = harness, column
        self.row = rows(tmp_path)[row]
        self.extra = tmp_path / "extra"
        self.extra.mkdir()
        (harness.workspace / "notes.txt").write_text(DISK_TEXT)
        default = "allow" if column == "allowed" else "ask"
        rule = f'[agents.coder.permission]\ndefault = "{default}"'
        if column != "allowed":  # reads are allowed by default: make this one ask
            rule += '\nrules = [{tool = "read_file", behavior = "ask"}]'
        harness.configure([{"tool_calls": [self.row.call]}, {"text": "Done."}, {"text": "Next."}], agent=rule)

    def session_args(self) -> dict[str, Any]:
        servers = []
        if self.row.mcp:
            servers = [McpServerStdio(name="mini", command=sys.executable, args=[str(MCP_SERVER)], env=[])]
        extra = {"additional_directories": [str(self.extra)]} if self.row.extra_dir else {}
        return {"mcp_servers": servers, **extra}

    def spawn(self) -> Any:
        return self.harness.spawn(fs=self.row.fs, terminal=self.row.terminal)

    async def new_session(self, agent: Agent) -> str:
        if self.row.fs:
            agent.client.files[str(agent.workspace / "notes.txt")] = EDITOR_TEXT
        args = self.session_args()
        with anyio.fail_after(30):
            response = await agent.conn.new_session(cwd=str(agent.workspace), **args)
        return response.session_id

    def check(self, text: str, agent: Agent | None) -> None:
        """The effect of the call: through the editor when one served it (``agent``), else local."""
        work, calls = self.harness.workspace, agent.client.calls if agent else []
        name = next(k for k, v in rows(work.parent).items() if v == self.row)
        if name == "fs_read":
            assert (EDITOR_TEXT if agent else DISK_TEXT) in text
            assert ("fs/read_text_file" in calls) == bool(agent)
        elif name == "fs_write":
            if agent:
                assert "fs/write_text_file" in calls and agent.client.files[str(work / "out.txt")] == "approved"
                assert not (work / "out.txt").exists()  # the editor's buffer, not the disk behind its back
            else:
                assert (work / "out.txt").read_text() == "approved"
        elif name == "terminal":
            assert ("terminal/create" in calls) == bool(agent)
            assert (work / "ran.txt").read_text().strip() == "ran"
        elif name == "extra_dir":
            assert (self.extra / "a.txt").read_text() == "in", text
        else:
            assert "hey" in text and "not found" not in text and "not available" not in text, text


async def waiting_run(store_url: str, session_id: str) -> str:
    async with open_store(store_url) as store:
        session = await store.load_session(session_id)
        assert session is not None
        with anyio.fail_after(10):
            while True:
                page = await store.list_runs(thread_id=session.thread_id, statuses=["waiting"], limit=1)
                if page.items:
                    return page.items[0].run_id
                await anyio.sleep(0.05)


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("row", ROWS)
async def test_an_approved_call_behaves_like_an_allowed_one(harness: Harness, tmp_path: Path, row: str, column: str):
    cell = Cell(harness, tmp_path, row, column)
    if column in ("allowed", "live"):
        async with cell.spawn() as agent:
            sid = await cell.new_session(agent)
            assert await agent.prompt(sid, "go", timeout=30) == "end_turn"
            assert len(agent.client.permissions) == (0 if column == "allowed" else 1)
            cell.check(await stored_result(harness, sid), agent)
        return

    async with cell.spawn() as agent:
        agent.client.hold_permission = anyio.Event()  # the dialog stays open
        sid = await cell.new_session(agent)
        outcome: dict[str, str] = {}

        async def prompt() -> None:
            try:
                response = await agent.conn.prompt(session_id=sid, prompt=[text_block("go")])
                outcome["stop"] = response.stop_reason
            except ConnectionError:
                outcome["stop"] = "died"

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            with anyio.fail_after(15):
                await agent.client.permission_asked.wait()
            run_id = await waiting_run(harness.store, sid)
            if column == "cli_while_acp_lives":
                started = anyio.current_time()
                done = await anyio.to_thread.run_sync(approve, harness, run_id)
                assert done.returncode == 0, done.stderr
                assert "continues it" in done.stderr, done.stderr
                with anyio.fail_after(10):
                    while "stop" not in outcome:
                        await anyio.sleep(0.02)
                assert outcome["stop"] == "end_turn"
                assert anyio.current_time() - started < 5  # at once, not after a lease or a poll of 30 s
                withdrawn = [m for d, m in agent.wire.messages if m.get("method") == "$/cancel_request"]
                assert len(withdrawn) == 1  # the open question was withdrawn in the editor
                cell.check(await stored_result(harness, sid), agent)
                return
            os.kill(agent.process.pid, signal.SIGKILL)
            await agent.process.wait()

    if column == "cli_without_acp":
        done = await anyio.to_thread.run_sync(approve, harness, run_id)
        assert done.returncode == 0, done.stderr
        assert "is completed" in done.stdout, (done.stdout, done.stderr)
        cell.check(await stored_result(harness, sid), None)
        return

    async with cell.spawn() as agent:  # after kill -9: the editor reopens the session and asks again
        if row == "fs_read":
            agent.client.files[str(agent.workspace / "notes.txt")] = EDITOR_TEXT
        args = cell.session_args()
        with anyio.fail_after(30):
            await agent.conn.load_session(cwd=str(agent.workspace), session_id=sid, **args)
        assert await agent.prompt(sid, "continue", timeout=30) == "end_turn"
        assert len(agent.client.permissions) == 1
        cell.check(await stored_result(harness, sid), agent)


RESTARTS = 20


@pytest.mark.timeout(300)
async def test_prompts_and_answers_right_after_restarts_never_hit_a_busy_thread(harness: Harness) -> None:
    """Twenty kill -9 + restart rounds: a prompt sent at once after the restart waits for the recovered run (never
    ``thread already has an active run``), and the re-offered question answered at once runs the call once."""
    line = {"name": "run_command", "arguments": {"command": "echo x >> count.txt"}}
    turns = []
    for _ in range(RESTARTS):
        turns += [{"tool_calls": [line]}, {"text": "Appended."}, {"text": "Next.", "delay_ms": 50}]
    harness.configure(turns, agent='[agents.coder.permission]\ndefault = "ask"')
    count = harness.workspace / "count.txt"
    sid = ""
    for round_ in range(RESTARTS):
        async with harness.spawn() as agent:
            if not sid:
                sid = await agent.new_session()
            else:
                await agent.conn.load_session(cwd=str(agent.workspace), session_id=sid, mcp_servers=[])
            await agent.killed_while_asked(sid, "append")
        async with harness.spawn() as agent:  # at once: load, prompt, and the re-offered question answered at once
            await agent.conn.load_session(cwd=str(agent.workspace), session_id=sid, mcp_servers=[])
            assert await agent.prompt(sid, "go on", timeout=30) == "end_turn", f"round {round_}"
            assert len(agent.client.permissions) == 1
        assert count.read_text().splitlines() == ["x"] * (round_ + 1), f"round {round_}"


async def test_a_session_mcp_server_that_cannot_start_away_from_the_editor_is_named(harness: Harness, tmp_path: Path):
    """`runs approve` with no editor starts the session's MCP servers from their recorded specs; one that cannot start
    fails the call saying which server and why, not "tool not found", and the run still finishes."""
    server = tmp_path / "mini_server.py"
    server.write_text(MCP_SERVER.read_text())
    call = {"name": "mini__echo", "arguments": {"text": "hey"}}
    harness.configure([{"tool_calls": [call]}, {"text": "Done."}], agent='[agents.coder.permission]\ndefault = "ask"')
    async with harness.spawn() as agent:
        mini = McpServerStdio(name="mini", command=sys.executable, args=[str(server)], env=[])
        with anyio.fail_after(30):
            sid = (await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[mini])).session_id
        await agent.killed_while_asked(sid, "echo")
    run_id = await waiting_run(harness.store, sid)
    server.unlink()  # the server's program is gone by the time someone approves from the command line
    done = await anyio.to_thread.run_sync(approve, harness, run_id)
    assert done.returncode == 0 and "is completed" in done.stdout, done.stderr
    text = await stored_result(harness, sid)
    assert "is not available" in text and "'mini'" in text and "could not start" in text, text


async def test_a_re_offered_run_that_asks_again_is_asked_in_the_same_turn(harness: Harness) -> None:
    """After kill -9 and a restart, the re-offered call is approved; the resumed run then asks about a second call,
    which this same turn asks the editor too (not a run left waiting with nobody asking)."""
    first = {"name": "write_file", "arguments": {"path": "one.txt", "content": "1"}}
    second = {"name": "write_file", "arguments": {"path": "two.txt", "content": "2"}}
    turns = [{"tool_calls": [first]}, {"tool_calls": [second]}, {"text": "Both written."}, {"text": "Hello."}]
    harness.configure(turns, agent='[agents.coder.permission]\ndefault = "ask"')
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        await agent.killed_while_asked(sid, "write both")
    async with harness.spawn() as agent:
        await agent.conn.load_session(cwd=str(agent.workspace), session_id=sid, mcp_servers=[])
        assert await agent.prompt(sid, "go on", timeout=30) == "end_turn"
        assert len(agent.client.permissions) == 2
        assert (agent.workspace / "one.txt").read_text() == "1" and (agent.workspace / "two.txt").read_text() == "2"

"""``session/load`` replays each tool call with the status it had live: completed, failed, rejected, cancelled with
its turn, and left with an unknown outcome by a crash (pending a decision, then as decided). Real agent processes
over one store: the statuses a new process replays are compared with the ones the editor saw live."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block

from .conftest import Agent, Harness

pytestmark = pytest.mark.anyio

RULES = '[agents.coder.permission]\ndefault = "ask"\nrules = [{ tool = "read_file", behavior = "allow" }, ' + (
    '{ tool = "run_command(touch going*)", behavior = "allow" }]'
)
TURNS: list[dict[str, Any]] = [
    {"tool_calls": [
        {"id": "completed", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "failed", "name": "read_file", "arguments": {"path": "missing.txt"}},
        {"id": "rejected", "name": "write_file", "arguments": {"path": "b.txt", "content": "B"}},
    ]},
    {"text": "Noted."},
    {"tool_calls": [{"id": "cancelled", "name": "run_command", "arguments": {"command": "touch going && sleep 30"}}]},
    {"tool_calls": [{"id": "unknown", "name": "run_command", "arguments": {"command": "mkdir running && sleep 30"}}]},
    *[{"text": "Fine."}] * 4,
]  # fmt: skip


def final(updates: list[dict[str, Any]]) -> dict[str, str]:
    """Each tool call's last status in ``updates``."""
    return {
        u["toolCallId"]: u["status"]
        for u in updates
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u
    }


async def until(path: Path) -> None:
    with anyio.fail_after(20):
        while not path.exists():
            await anyio.sleep(0.05)


async def load(agent: Agent, session: str, cwd: Path) -> list[dict[str, Any]]:
    with anyio.fail_after(20):
        await agent.conn.load_session(session_id=session, cwd=str(cwd), mcp_servers=[])
    return agent.updates(session)


async def test_load_replays_every_tool_call_status_as_it_was_live(harness: Harness) -> None:
    work = harness.workspace
    (work / "a.txt").write_text("A\n")
    harness.configure(TURNS, agent=RULES)
    async with harness.spawn() as first:
        session = await first.new_session()
        first.client.answers = ["reject_once"]
        assert await first.prompt(session, "one") == "end_turn"
        async with anyio.create_task_group() as tg:
            tg.start_soon(first.prompt, session, "two")
            await until(work / "going")  # the command runs: the person cancels the turn
            await first.conn.cancel(session_id=session)

        async def crashing() -> None:
            with pytest.raises(ConnectionError):
                await first.conn.prompt(session_id=session, prompt=[text_block("three")])

        async with anyio.create_task_group() as tg:
            tg.start_soon(crashing)
            await until(work / "running")  # approved, and running: the agent dies now
            os.kill(first.process.pid, signal.SIGKILL)
            await first.process.wait()
        live = final(first.updates(session))
    assert live == {
        "completed": "completed",
        "failed": "failed",
        "rejected": "failed",
        "cancelled": "failed",
        "unknown": "in_progress",
    }

    async with harness.spawn() as second:
        replayed = await load(second, session, work)
        # nobody knows whether the crashed call ran: it waits for a decision, as the next prompt asks
        assert final(replayed) == live | {"unknown": "pending"}
        second.client.answers = ["reject_once"]
        assert await second.prompt(session, "four") == "end_turn"
        live |= final(second.updates(session)[len(replayed) :])
    assert live["unknown"] == "failed"

    async with harness.spawn() as third:
        assert final(await load(third, session, work)) == live

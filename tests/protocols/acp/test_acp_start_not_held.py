"""Never held hostage at start: configured MCP servers connect and ``[tools] modules`` import in the background, so
``session/new`` answers at once whatever they do, what failed or hangs is named to the person at the next prompt, and
stdin EOF ends the process promptly, even while an import never returns.

The real agent process over real pipes, the official ACP SDK as the editor; the silent MCP server is a script that
reads its stdin and never answers. Bounds are generous: the old behaviour took the server's whole timeout (here 120 s)
or forever.
"""

from __future__ import annotations

import sys
import time

import anyio
import pytest

from .conftest import ROOT, Agent, Harness

pytestmark = pytest.mark.anyio

SILENT = ROOT / "tests" / "protocols" / "silent_mcp_server.py"
HELLO = [{"text": "Hello."}, {"text": "Again."}]


def silent_server(timeout_s: float) -> str:
    return f'[mcp_servers.silent]\ncommand = "{sys.executable}"\nargs = ["{SILENT}"]\ntimeout_s = {timeout_s}\n'


def modules(*names: str) -> str:
    return "[tools]\nmodules = [" + ", ".join(f'"tests.protocols.{n}"' for n in names) + "]\n"


def told(agent: Agent, sid: str) -> str:
    chunks = [u for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
    return "".join(u["content"]["text"] for u in chunks)


async def timed_new_session(agent: Agent) -> tuple[str, float]:
    started = time.monotonic()
    sid = await agent.new_session()  # fails after 20 s
    return sid, time.monotonic() - started


async def exit_after_eof(agent: Agent) -> float:
    """Close the agent's stdin; the seconds until it exited (fails after 20 s)."""
    started = time.monotonic()
    agent.process.stdin.close()
    with anyio.fail_after(20):
        code = await agent.process.wait()
    assert code == 0
    return time.monotonic() - started


async def test_a_silent_mcp_server_holds_neither_session_new_nor_the_exit(harness: Harness) -> None:
    harness.configure(HELLO, agent=silent_server(120))
    async with harness.spawn() as agent:
        _, took = await timed_new_session(agent)
        assert took < 10  # it took the server's whole timeout, 120 s
        assert await exit_after_eof(agent) < 5  # stopping the server it waits for took 7 s


async def test_a_failed_mcp_server_is_named_at_the_next_prompt(harness: Harness) -> None:
    harness.configure(HELLO, agent=silent_server(1))
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "hi") == "end_turn"
        text = told(agent, sid)
        assert "MCP server 'silent' is not available" in text and "no answer within 1 s" in text, text
        assert "Hello." in text
        assert await agent.prompt(sid, "again") == "end_turn"
        assert told(agent, sid).count("'silent'") == 1  # told once


async def test_a_tool_module_that_raises_at_import_is_named_and_the_agent_works(harness: Harness) -> None:
    harness.configure(HELLO, agent=modules("raising_tools"))
    async with harness.spawn() as agent:
        sid = await agent.new_session()  # it failed: "the agent could not start"
        assert await agent.prompt(sid, "hi") == "end_turn"
        text = told(agent, sid)
        assert "importing 'tests.protocols.raising_tools' failed: RuntimeError: boom at import" in text, text


async def test_a_tool_module_whose_import_never_returns_holds_nothing(harness: Harness) -> None:
    harness.configure(HELLO, agent=modules("hanging_tools"))
    async with harness.spawn() as agent:
        sid, took = await timed_new_session(agent)
        assert took < 10  # it was never answered
        assert await agent.prompt(sid, "hi", timeout=40) == "end_turn"  # after the loading bound
        assert "tool module 'tests.protocols.hanging_tools' is not ready after" in told(agent, sid)
        assert await exit_after_eof(agent) < 10  # stdin EOF was ignored: it never exited

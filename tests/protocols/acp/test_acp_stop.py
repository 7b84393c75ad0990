"""Stopping ``awaken-stdio acp`` with SIGTERM or SIGINT during a long ``run_command``: out within 2 s, the command's
session (its background job included) gone, the store intact, the session loadable by the next process."""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.process_sessions import session_members, wait_until_gone

from .test_acp_wire import RawAgent, _spawn

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

COMMAND = "sleep 60 >/dev/null 2>&1 & echo $$ > sid.txt; sleep 30"


async def wait_for_file(path: Path) -> int:
    with anyio.fail_after(20):
        while not path.exists() or not path.read_text().strip():
            await anyio.sleep(0.02)
    return int(path.read_text())


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
async def test_a_stop_signal_ends_turns_commands_and_the_process(harness, sig: int, code: int) -> None:
    call = {"name": "run_command", "arguments": {"command": COMMAND}}
    harness.configure([{"text": "working", "tool_calls": [call]}, {"text": "done"}],
                      agent='[agents.coder.permission]\ndefault = "allow"')  # fmt: skip
    async with await _spawn(harness) as process:
        agent = RawAgent(process)
        await agent.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        session_id = (await agent.request(2, "session/new", {"cwd": str(harness.workspace), "mcpServers": []}))[
            "result"
        ]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
        await agent.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}).encode()
                         + b"\n")  # fmt: skip
        sid = await wait_for_file(harness.workspace / "sid.txt")
        assert len(session_members(sid)) >= 2  # the shell's sleep and the background job
        process.send_signal(sig)
        started = time.monotonic()
        with anyio.fail_after(10):
            assert await process.wait() == code
        assert time.monotonic() - started < 2
    assert wait_until_gone(sid) == []
    database = harness.store.removeprefix("sqlite:///")
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    async with await _spawn(harness) as process:  # the next process loads the session
        agent = RawAgent(process)
        await agent.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        params = {"sessionId": session_id, "cwd": str(harness.workspace), "mcpServers": []}
        await agent.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": params}).encode()
                         + b"\n")  # fmt: skip
        while (answer := await agent.receive()).get("id") != 2:
            pass
        assert "result" in answer, answer
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(10):
            assert await process.wait() == 0

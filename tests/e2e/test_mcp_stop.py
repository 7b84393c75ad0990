"""Stopping ``awaken-stdio mcp`` with SIGTERM during a long ``run_command`` call: out within 2 s with exit code 0, the
command's session (its background job included) gone, the store intact."""

from __future__ import annotations

import signal
import sqlite3
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.e2e.test_mcp_server_wire import INIT, Raw, spawn
from tests.process_sessions import session_members, wait_until_gone
from tests.protocols.mcp.support import make_env

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


async def test_sigterm_cancels_a_running_command_and_exits(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    raw: Raw = await spawn(env)
    async with raw.process as process:
        await raw.request(1, "initialize", INIT)
        await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        command = "sleep 60 >/dev/null 2>&1 & echo $$ > sid.txt; sleep 30"
        await raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "run_command", "arguments": {"command": command}}})  # fmt: skip
        sid_file = env.cwd / "sid.txt"
        with anyio.fail_after(20):
            while not sid_file.exists() or not sid_file.read_text().strip():
                await anyio.sleep(0.02)
        sid = int(sid_file.read_text())
        assert len(session_members(sid)) >= 2
        process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        with anyio.fail_after(10):
            assert await process.wait() == 0
        assert time.monotonic() - started < 2
    assert wait_until_gone(sid) == []
    with sqlite3.connect(env.store.removeprefix("sqlite:///")) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

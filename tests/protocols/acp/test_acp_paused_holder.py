"""The editor as the decider after its holder was paused inside an approved effect (a closed laptop lid): a second
editor on the same store loads the session and is asked with the choices an unknown outcome needs (the effect
ledger says the call started under a claim whose lease has lapsed), records it as done, and the run completes. When
the first process wakes, its claim is gone: it writes nothing, and the effect happened once."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block

from awaken_stdio.stores import open_store

from .conftest import Harness

pytestmark = pytest.mark.anyio

LEASE_S = 6.0
COMMAND = "echo once >> count.txt && touch running && sleep 8"
TURNS: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": COMMAND}}]},
    {"text": "Done."},
    {"text": "Fine."},
]


async def until(path: Path) -> None:
    with anyio.fail_after(20):
        while not path.exists():
            await anyio.sleep(0.05)


def stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.timeout(120)
async def test_a_second_editor_decides_an_effect_its_paused_holder_left_unknown(harness: Harness) -> None:
    work = harness.workspace
    harness.configure(TURNS, agent='[agents.coder.permission]\ndefault = "ask"')
    async with harness.spawn() as first:
        session = await first.new_session()
        first.client.answers = ["allow_once"]

        async def holding() -> None:  # the first editor's prompt: it never ends normally here
            try:
                await first.conn.prompt(session_id=session, prompt=[text_block("go")])
            except Exception:
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(holding)
            await until(work / "running")  # approved, started, its effect done: the lid closes now
            os.kill(first.process.pid, signal.SIGSTOP)
            with anyio.fail_after(5):
                while not stopped(first.process.pid):
                    await anyio.sleep(0.02)
            await anyio.sleep(LEASE_S + 0.5)

            async with harness.spawn() as second:
                with anyio.fail_after(20):
                    await second.conn.load_session(session_id=session, cwd=str(work), mcp_servers=[])
                second.client.answers = ["id:done"]  # the person looked: the line is there
                assert await second.prompt(session, "where are we?", timeout=30) == "end_turn"
                # asked with the unknown outcome's choices (run again, record as done, skip), not a plain allow
                assert second.client.permissions[-1]["kinds"] == ["allow_once", "allow_once", "reject_once"]

            os.kill(first.process.pid, signal.SIGCONT)  # it wakes: its claim is gone, it writes nothing
            await anyio.sleep(8)
            tg.cancel_scope.cancel()
    assert (work / "count.txt").read_text().splitlines() == ["once"]
    async with open_store(harness.store) as store:
        runs = (await store.list_runs()).items  # the approved run, and the second editor's prompt after it
        assert [r.display_status for r in runs] == ["completed", "completed"]

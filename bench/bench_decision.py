"""Decision to effect across two processes: a holder process keeps a run waiting live (its one call asks); this
process records the approval (``App.decide``, as ``runs approve`` does) and the time is taken until the holder's tool
has written its line and the decision returned. On PostgreSQL the holder is told at once (the decider's NOTIFY
wakes its poller, and the holder's wakes the decider back); on SQLite each finds the other's write at its next poll
(``poll_every_s``, 0.2 s by default), so the two figures differ by those waits. ``polls`` counts the mailbox waits
of both processes that ran to their interval (polls no wake-up asked for) from the holder's wait to the effect: 0 on
PostgreSQL, where nothing on the path is polled. SQLite always; PostgreSQL when ``AWAKEN_STDIO_TEST_PG`` names a
server (a scratch database per round, dropped afterwards)."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream

from awaken_stdio.app.app import load_settings, open_app
from awaken_stdio.app.claims import MailboxConfig
from awaken_stdio.contract.suspension import ToolCallResume
from bench._process import close_process
from tests.e2e.crash_tools import CONFIG

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5
SCRIPT = '{"turns": [{"text": "", "tool_calls": [{"name": "append_line", "arguments": {"line": "hello"}, "id": "c1"}]}, {"text": "done"}]}'  # noqa: E501


@dataclass(frozen=True, slots=True)
class Round:
    seconds: float  # from the decision to the holder's effect
    returned: float  # from the decision to its return in the deciding process (told the holder took it)
    polls: int  # waits that ran to their interval, in both processes, from the holder's wait to its end


async def lines(stream: ByteReceiveStream) -> AsyncIterator[str]:
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode()


async def one_round(where: Path, store: str, poll_s: float | None = None) -> Round:
    """One decision across two processes (polling every ``poll_s`` where given), its effect checked to run once."""
    (where / "script.json").write_text(SCRIPT)
    (where / "config.toml").write_text(CONFIG)
    out = where / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CRASH_OUT": str(out)}
    command = [sys.executable, "-m", "bench._holder", str(where / "config.toml"), store]
    holder = await anyio.open_process([*command, str(poll_s)] if poll_s else command, cwd=ROOT, env=env)
    mailbox = MailboxConfig(poll_every_s=poll_s) if poll_s else None
    try:
        assert holder.stdout is not None
        said = lines(holder.stdout)
        with anyio.fail_after(60):
            line = ""
            while not line.startswith("WAITING "):
                line = await anext(said)
        _, run_id, held_ticks = line.split()
        async with open_app(load_settings(str(where / "config.toml"), store), serve=False, mailbox=mailbox) as app:
            wakeup = app.store.mailbox.wakeup
            ticks = wakeup.ticks
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(app.decide, run_id, [("perm_c1", ToolCallResume.approve())])
                with anyio.fail_after(30):
                    while not (out.exists() and out.read_text()):  # noqa: ASYNC110 - a file another process writes
                        await anyio.sleep(0.001)
                took = time.perf_counter() - started
            returned = time.perf_counter() - started
            ticks = wakeup.ticks - ticks
        with anyio.fail_after(30):
            while not line.startswith("DONE "):
                line = await anext(said)
        assert out.read_text() == "hello\n"  # once
        return Round(took, returned, ticks + int(line.split()[2]) - int(held_ticks))
    finally:
        await close_process(holder)


async def pg_store(server: str) -> tuple[str, str]:
    import asyncpg

    name = f"awaken_bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, f"{server.rsplit('/', 1)[0]}/{name}"


async def drop(server: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def row(backend: str, rounds: list[Round]) -> dict[str, Any]:
    ms = [r.seconds * 1000 for r in rounds]
    polls = sum(r.polls for r in rounds) / len(rounds)
    note = f"{ROUNDS} rounds, min {min(ms):.0f} ms, max {max(ms):.0f} ms, {polls:.1f} polls a round"
    return {"benchmark": f"decision.{backend}", "metric": "decision to effect, two processes (median)",
            "value": statistics.median(ms), "unit": "ms", "note": note}  # fmt: skip


async def run() -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rounds: list[Round] = []
        for i in range(ROUNDS):
            where = Path(tmp) / f"sqlite-{i}"
            where.mkdir()
            rounds.append(await one_round(where, f"sqlite://{where}/awaken.db"))
        rows.append(row("sqlite", rounds))
        if server := os.environ.get("AWAKEN_STDIO_TEST_PG"):
            rounds = []
            for i in range(ROUNDS):
                where = Path(tmp) / f"pg-{i}"
                where.mkdir()
                name, url = await pg_store(server)
                try:
                    rounds.append(await one_round(where, url))
                finally:
                    await drop(server, name)
            rows.append(row("postgresql", rounds))
    return rows

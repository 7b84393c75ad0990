"""Decision to effect across two processes: a holder process keeps a run waiting live (its one call asks); this
process records the approval (``App.decide``, as ``runs approve`` does) and the time is taken until the holder's tool
has written its line. On PostgreSQL the holder is told at once (the decider's NOTIFY wakes its poller); on SQLite
it finds the decision at its next poll (``poll_every_s``, 0.2 s by default), so the two figures differ by that wait.
SQLite always; PostgreSQL when ``AWAKEN_STDIO_TEST_PG`` names a server (a scratch database per round, dropped
afterwards)."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

from awaken_stdio.app.app import load_settings, open_app
from awaken_stdio.contract.suspension import ToolCallResume
from bench._process import close_process
from tests.e2e.crash_tools import CONFIG

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5
SCRIPT = '{"turns": [{"text": "", "tool_calls": [{"name": "append_line", "arguments": {"line": "hello"}, "id": "c1"}]}, {"text": "done"}]}'  # noqa: E501


async def one_round(where: Path, store: str) -> float:
    """Seconds from the decision to the holder's effect."""
    (where / "script.json").write_text(SCRIPT)
    (where / "config.toml").write_text(CONFIG)
    out = where / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CRASH_OUT": str(out)}
    command = [sys.executable, "-m", "bench._holder", str(where / "config.toml"), store]
    holder = await anyio.open_process(command, cwd=ROOT, env=env)
    try:
        assert holder.stdout is not None
        with anyio.fail_after(60):
            line = b""
            while not line.startswith(b"WAITING "):
                line = (await holder.stdout.receive()).splitlines()[0]
        run_id = line.split()[1].decode()
        async with open_app(load_settings(str(where / "config.toml"), store), serve=False) as app:
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(app.decide, run_id, [("perm_c1", ToolCallResume.approve())])
                with anyio.fail_after(30):
                    while not (out.exists() and out.read_text()):  # noqa: ASYNC110 - a file another process writes
                        await anyio.sleep(0.001)
                took = time.perf_counter() - started
        assert out.read_text() == "hello\n"  # once
        return took
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


def row(backend: str, seconds: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in seconds]
    note = f"{ROUNDS} rounds, min {min(ms):.0f} ms, max {max(ms):.0f} ms"
    return {"benchmark": f"decision.{backend}", "metric": "decision to effect, two processes (median)",
            "value": statistics.median(ms), "unit": "ms", "note": note}  # fmt: skip


async def run() -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        seconds = []
        for i in range(ROUNDS):
            where = Path(tmp) / f"sqlite-{i}"
            where.mkdir()
            seconds.append(await one_round(where, f"sqlite://{where}/awaken.db"))
        rows.append(row("sqlite", seconds))
        if server := os.environ.get("AWAKEN_STDIO_TEST_PG"):
            seconds = []
            for i in range(ROUNDS):
                where = Path(tmp) / f"pg-{i}"
                where.mkdir()
                name, url = await pg_store(server)
                try:
                    seconds.append(await one_round(where, url))
                finally:
                    await drop(server, name)
            rows.append(row("postgresql", seconds))
    return rows

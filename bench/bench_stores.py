"""Store benchmarks: checkpoints per second (a ten-message step), loading a 1,000-message thread (again, and first
in a process), size on disk.

Run by ``make bench`` (``bench/__main__.py`` calls ``run()``). SQLite and memory always; PostgreSQL when
``AWAKEN_STDIO_TEST_PG`` names a server (a scratch database is created on it and dropped afterwards). A step is
what the runtime commits at a step boundary: an assistant message with a tool call, the tool's result, and so on
(ten messages of realistic size), the run record and the thread state.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from awaken_stdio.contract.inference import TokenUsage
from awaken_stdio.contract.messages import Message, ToolCall
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import Checkpoint, RunRecord, Store
from awaken_stdio.stores import open_store

CHECKPOINTS = 2000
STEP_MESSAGES = 10
THREAD_MESSAGES = 1000
LOADS = 20
_TOOL_OUTPUT = "def handler(request):\n    return respond(request.json())\n" * 8  # ~0.5 KB of file text


def step_messages(step: int) -> list[Message]:
    out: list[Message] = []
    for i in range(STEP_MESSAGES // 2):
        call = ToolCall(
            id=f"call_{step}_{i}", name="read_file", arguments={"path": f"src/module_{i}.py", "line": 1, "limit": 200}
        )
        out.append(Message.assistant(f"Let me look at module {i} to see how requests are handled.", [call]))
        out.append(Message.tool(call.id, _TOOL_OUTPUT))
    return out


def step_checkpoint(thread_id: str, step: int, count: int) -> Checkpoint:
    run = RunRecord(
        run_id=f"run-{thread_id}",
        thread_id=thread_id,
        agent_id="coder",
        status="running",
        steps=step,
        usage=TokenUsage(input_tokens=1200 * step, output_tokens=90 * step),
    )
    state = PersistedState(
        revision=step, extensions={"__runtime.tool_call_states": {f"call_{step}_0": {"status": "succeeded"}}}
    )
    return Checkpoint(
        thread_id=thread_id, expected_message_count=count, messages=step_messages(step), run=run, thread_state=state
    )


def row(benchmark: str, metric: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
    return {"benchmark": benchmark, "metric": metric, "value": round(value, 3), "unit": unit, **extra}


async def checkpoints_per_second(store: Store) -> float:
    """Built before the clock starts: this measures the store, not message construction."""
    per_thread = THREAD_MESSAGES // STEP_MESSAGES  # a new thread every 1,000 messages, like real conversations
    steps = [(f"bench-{n // per_thread}", n % per_thread) for n in range(CHECKPOINTS)]
    checkpoints = [step_checkpoint(t, step + 1, step * STEP_MESSAGES) for t, step in steps]
    start = time.perf_counter()
    for cp in checkpoints:
        await store.checkpoint(cp)
    return CHECKPOINTS / (time.perf_counter() - start)


async def load_ms(store: Store) -> float:
    times = []
    for _ in range(LOADS):
        start = time.perf_counter()
        loaded = await store.load_thread("bench-0")
        times.append((time.perf_counter() - start) * 1000)
        assert loaded is not None and len(loaded.messages) == THREAD_MESSAGES
    return statistics.median(times)


async def measure(name: str, url: str, **extra: Any) -> list[dict[str, Any]]:
    async with open_store(url) as store:
        rate = await checkpoints_per_second(store)
        load = await load_ms(store)
    rows = [
        row(name, f"checkpoints/s ({STEP_MESSAGES}-message step)", rate, "1/s", **extra),
        row(name, f"load a {THREAD_MESSAGES}-message thread again (median)", load, "ms",
            note="a store keeps the conversations it served: only what was appended since is read"),
    ]  # fmt: skip
    if not url.startswith("memory:"):  # a process's first load of the thread, on a store opened afresh
        async with open_store(url) as store:
            started = time.perf_counter()
            loaded = await store.load_thread("bench-0")
            first = (time.perf_counter() - started) * 1000
            assert loaded is not None and len(loaded.messages) == THREAD_MESSAGES
        rows.append(row(name, f"first load of a {THREAD_MESSAGES}-message thread", first, "ms"))
    return rows


def sqlite_size(path: Path) -> float:
    import sqlite3

    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return path.stat().st_size


async def postgres_rows(server: str) -> list[dict[str, Any]]:
    import asyncpg

    name = f"awaken_bench_{uuid.uuid4().hex[:12]}"
    url = urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        rows = await measure("stores.postgresql", url)
        conn = await asyncpg.connect(url)
        try:
            size = await conn.fetchval(
                "SELECT sum(pg_total_relation_size(quote_ident(tablename))) FROM pg_tables "
                "WHERE schemaname = current_schema()"
            )
        finally:
            await conn.close()
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()
    messages = CHECKPOINTS * STEP_MESSAGES
    return [*rows, row("stores.postgresql", "size per 1,000 messages", float(size) / 1024 / (messages / 1000), "KiB")]


async def run() -> list[dict[str, Any]]:
    rows = await measure("stores.memory", "memory://")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        rows += await measure("stores.sqlite", f"sqlite://{path}", note="target: at least 2,000/s (issue 3)")
        messages = CHECKPOINTS * STEP_MESSAGES
        rows.append(
            row("stores.sqlite", "size per 1,000 messages", sqlite_size(path) / 1024 / (messages / 1000), "KiB")
        )
    if server := os.environ.get("AWAKEN_STDIO_TEST_PG"):
        rows += await postgres_rows(server)
    return rows

"""Ten-step runs on SQLite beside the same runs in memory, as users run them and as the fastest case.

Four variants, each a ten-turn scripted conversation with one call of ``lookup`` per turn:

- the tool as the README teaches it (a bare ``@tool``: it may change things, so each call is marked ``started`` in
  the store before it runs) or declared ``read_only=True`` (no mark: its steps may wait for the run's end);
- a scripted model that answers at once and never lets the event loop run (``delay_ms`` 0), or one that takes
  ``delay_ms`` 1 before each answer, as any real model does (the event loop runs meanwhile).

Per variant: CPU per run (the whole process: the event loop and SQLite's own threads, on one core) on SQLite and in
memory, and the ratio (the memory run's CPU over SQLite's: 1.0 means durability costs nothing); the same in
wall-clock; the write transactions of one run (``BEGIN IMMEDIATE`` statements traced on the store's connections); and
the CPU of one write transaction (what the SQLite run costs above the memory run, over its transactions). The SQLite
and memory runs alternate in rounds and the best round of each is kept, so load that drifts moves both.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from awaken_stdio import AgentRuntime, AgentSpec, ScriptedModel, tool
from awaken_stdio.contract.stores import Store
from awaken_stdio.stores import open_store
from awaken_stdio.stores.memory import MemoryStore
from bench._begins import Begins

TURNS = 10
ROUNDS = 4
RUNS = 40  # per round


@tool(name="lookup")
async def lookup_bare(key: str) -> str:
    """Look a key up (a bare ``@tool``, as the README writes one: it may change things)."""
    return f"value of {key}"


@tool(name="lookup", kind="read", read_only=True)
async def lookup_read_only(key: str) -> str:
    """Look a key up (declared read-only: running it again changes nothing)."""
    return f"value of {key}"


def runtime(store: Store, *, read_only: bool, delay_ms: int) -> AgentRuntime:
    """A runtime whose agent plays ten turns, nine of them calling ``lookup`` once, each after ``delay_ms``."""
    turns: list[dict[str, Any]] = [
        {"text": f"Step {i}: looking up.", "delay_ms": delay_ms,
         "tool_calls": [{"name": "lookup", "arguments": {"key": f"k{i}"}}]}
        for i in range(TURNS - 1)
    ]  # fmt: skip
    turns.append({"text": "All done.", "delay_ms": delay_ms})
    return AgentRuntime(
        agents=[AgentSpec(id="bench", model="m", max_rounds=TURNS + 1)],
        models={"m": ScriptedModel({"turns": turns})},
        tools=[lookup_read_only if read_only else lookup_bare],
        store=store,
    )


async def per_run(rt: AgentRuntime, n: int) -> tuple[float, float]:
    """CPU seconds (the whole process) and wall-clock seconds per run, over ``n`` runs one after another."""
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(n):
        result = await rt.run(f"conversation {i}")
        assert result.steps == TURNS, result
    return (time.process_time() - cpu) / n, (time.perf_counter() - wall) / n


async def _variant(store: Store, *, read_only: bool, delay_ms: int) -> list[dict[str, Any]]:
    durable = runtime(store, read_only=read_only, delay_ms=delay_ms)
    memory = runtime(MemoryStore(), read_only=read_only, delay_ms=delay_ms)
    await per_run(durable, 10)  # warm-up
    await per_run(memory, 10)
    begins = await Begins.on(store, writes_only=True)
    await per_run(durable, 10)
    writes = begins.count / 10
    await begins.stop()
    on_disk: list[tuple[float, float]] = []
    in_memory: list[tuple[float, float]] = []
    for _ in range(ROUNDS):
        in_memory.append(await per_run(memory, RUNS))
        on_disk.append(await per_run(durable, RUNS))
    cpu, mem_cpu = min(c for c, _ in on_disk), min(c for c, _ in in_memory)
    wall, mem_wall = min(w for _, w in on_disk), min(w for _, w in in_memory)
    tool_kind = "read-only tool" if read_only else "bare @tool"
    model = f"model yields ({delay_ms} ms)" if delay_ms else "model never yields"
    bench = f"durable: 10-step run, {tool_kind}, {model}"
    goal = "goal >= 0.8x" if read_only else "goal >= 0.6x"
    return [
        {"benchmark": bench, "metric": "runs per CPU-second on SQLite", "value": 1 / cpu, "unit": "runs/CPU-s",
         "baseline": 1 / mem_cpu, "note": f"baseline: the same runs in memory; {goal}" if delay_ms else
         "baseline: the same runs in memory"},
        {"benchmark": bench, "metric": "runs/s wall-clock on SQLite", "value": 1 / wall, "unit": "runs/s",
         "baseline": 1 / mem_wall, "note": "baseline: the same runs in memory"},
        {"benchmark": bench, "metric": "write transactions per run", "value": writes, "unit": "tx",
         "note": "goal <= 11"},
        {"benchmark": bench, "metric": "CPU per write transaction", "value": (cpu - mem_cpu) / max(writes, 1) * 1e6,
         "unit": "us", "note": "SQLite run's CPU above the memory run's, over its write transactions"},
    ]  # fmt: skip


async def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(f"sqlite://{tmp}/runs.db") as store:
            for read_only in (False, True):
                for delay_ms in (1, 0):
                    rows += await _variant(store, read_only=read_only, delay_ms=delay_ms)
    return rows

"""The runtime core in memory: ten-turn scripted conversations with one tool call per turn.

Figures: runs per second on one core (no event sink, and with a sink that consumes every event), peak memory
while one run executes, and memory retained per finished run (conversation, run record and state kept by the
in-memory store), both from tracemalloc.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from typing import Any

from awaken_stdio import AgentRuntime, AgentSpec, ScriptedModel, tool
from awaken_stdio.contract.events import AgentEvent
from awaken_stdio.stores.memory import MemoryStore

TURNS = 10


@tool(kind="read", read_only=True)
async def lookup(key: str) -> str:
    """Look a key up (async: runs on the event loop)."""
    return f"value of {key}"


@tool(name="lookup", kind="read", read_only=True)
def lookup_sync(key: str) -> str:
    """Look a key up (sync: runs in a worker thread)."""
    return f"value of {key}"


def _runtime(sync: bool = False) -> AgentRuntime:
    turns: list[dict[str, Any]] = [
        {"text": f"Step {i}: looking up.", "tool_calls": [{"name": "lookup", "arguments": {"key": f"k{i}"}}]}
        for i in range(TURNS - 1)
    ]
    turns.append({"text": "All done."})
    model = ScriptedModel({"turns": turns})
    return AgentRuntime(
        agents=[AgentSpec("bench", model="m", max_rounds=TURNS + 1)],
        models={"m": model},
        tools=[lookup_sync if sync else lookup],
        store=MemoryStore(),
    )


async def _rate(runtime: AgentRuntime, n: int, sink: Any = None) -> float:
    started = time.perf_counter()
    for i in range(n):
        result = await runtime.run(f"conversation {i}", sink)
        assert result.steps == TURNS, result
    return n / (time.perf_counter() - started)


async def run() -> list[dict[str, Any]]:
    runtime = _runtime()
    await _rate(runtime, 50)  # warm-up
    plain = max([await _rate(_runtime(), 300) for _ in range(3)])

    async def sink(event: AgentEvent) -> None:
        event.to_json()

    with_sink = max([await _rate(_runtime(), 300, sink) for _ in range(3)])
    sync_tool = max([await _rate(_runtime(sync=True), 300) for _ in range(3)])

    gc.collect()
    runtime = _runtime()
    tracemalloc.start()
    await runtime.run("warm-up")
    gc.collect()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    await runtime.run("measure peak")
    _, peak = tracemalloc.get_traced_memory()
    gc.collect()
    n = 200
    before, _ = tracemalloc.get_traced_memory()
    for i in range(n):
        await runtime.run(f"retained {i}")
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return [
        {
            "benchmark": "runtime: 10-turn run, 1 tool call/turn",
            "metric": "runs/s (no sink)",
            "value": plain,
            "unit": "runs/s",
            "note": "aim >= 500",
        },
        {
            "benchmark": "runtime: 10-turn run, 1 tool call/turn",
            "metric": "runs/s (events to JSON)",
            "value": with_sink,
            "unit": "runs/s",
        },
        {
            "benchmark": "runtime: 10-turn run, 1 tool call/turn",
            "metric": "runs/s (sync tool, thread)",
            "value": sync_tool,
            "unit": "runs/s",
        },
        {
            "benchmark": "runtime: 10-turn run, 1 tool call/turn",
            "metric": "peak memory during a run",
            "value": (peak - base) / 1024,
            "unit": "KiB",
        },
        {
            "benchmark": "runtime: 10-turn run, 1 tool call/turn",
            "metric": "memory retained per finished run",
            "value": (after - before) / n / 1024,
            "unit": "KiB",
            "note": "aim < 200 KB",
        },
    ]

"""The runtime core: ten-turn scripted conversations with one tool call per turn, in memory and on SQLite.

Figures: runs per second on one core in memory (no event sink, beside agno running the same script when the ``bench``
extra is installed; and with a sink that consumes every event), the same runs on SQLite beside the same runs in
memory (alternating rounds) and beside a bare SQLite loop writing what each step writes (one sqlite3 transaction per
step, no runtime), the SQLite transactions of one run, peak memory while one run executes, and memory retained per
finished run (conversation, run record and state kept by the in-memory store), both from tracemalloc.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from awaken_stdio import AgentRuntime, AgentSpec, ScriptedModel, tool
from awaken_stdio.contract.events import AgentEvent
from awaken_stdio.contract.stores import Store
from awaken_stdio.stores import open_store
from awaken_stdio.stores.memory import MemoryStore
from bench._begins import Begins

TURNS = 10


@tool(kind="read", read_only=True)
async def lookup(key: str) -> str:
    """Look a key up (async: runs on the event loop)."""
    return f"value of {key}"


@tool(name="lookup", kind="read", read_only=True)
def lookup_sync(key: str) -> str:
    """Look a key up (sync: runs in a worker thread)."""
    return f"value of {key}"


def _runtime(sync: bool = False, store: Store | None = None) -> AgentRuntime:
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
        store=store or MemoryStore(),
    )


async def _rate(runtime: AgentRuntime, n: int, sink: Any = None) -> float:
    started = time.perf_counter()
    for i in range(n):
        result = await runtime.run(f"conversation {i}", sink)
        assert result.steps == TURNS, result
    return n / (time.perf_counter() - started)


def _bare_sqlite(path: Path, n: int) -> float:
    """Runs per second of a loop that only writes what a ten-step run writes: per step, in one transaction, two
    messages appended (an assistant call and its result) and the run row updated; no runtime at all."""
    body = json.dumps({"role": "assistant", "content": [{"type": "text", "text": "Step 1: looking up."}]})
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for pragma in ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL"):
            db.execute(pragma)
        db.execute("CREATE TABLE messages (thread TEXT, seq INTEGER, body TEXT, PRIMARY KEY (thread, seq))")
        db.execute("CREATE TABLE runs (run TEXT PRIMARY KEY, body TEXT)")
        started = time.perf_counter()
        for r in range(n):
            for i in range(TURNS):
                db.execute("BEGIN IMMEDIATE")
                db.executemany(
                    "INSERT INTO messages VALUES (?, ?, ?)", [(f"t{r}", 2 * i, body), (f"t{r}", 2 * i + 1, body)]
                )
                db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?)", (f"t{r}", body))
                db.execute("COMMIT")
        return n / (time.perf_counter() - started)
    finally:
        db.close()


async def _sqlite_figures() -> list[dict[str, Any]]:
    """The runs on SQLite beside the same runs in memory, measured in alternating rounds (the best of each): a
    machine whose load drifts during the benchmark moves both figures, not their ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        bare = _bare_sqlite(Path(tmp) / "bare.db", 100)
        async with open_store(f"sqlite://{tmp}/runs.db") as store:
            runtime, in_memory = _runtime(store=store), _runtime()
            await _rate(runtime, 20)  # warm-up
            rates: list[float] = []
            memory_rates: list[float] = []
            for _ in range(5):
                memory_rates.append(await _rate(in_memory, 150))
                rates.append(await _rate(runtime, 150))
            rate, memory_rate = max(rates), max(memory_rates)
            begins = await Begins.on(store)
            await _rate(runtime, 10)
            per_run = begins.count / 10
    bench = "runtime: 10-turn run, 1 tool call/turn"
    return [
        {"benchmark": bench, "metric": "runs/s on SQLite (no sink)", "value": rate, "unit": "runs/s",
         "baseline": memory_rate, "note": "baseline: the same runs in memory, in alternating rounds; goal >= 0.7x"},
        {"benchmark": bench, "metric": "runs/s on SQLite vs a bare SQLite loop", "value": rate, "unit": "runs/s",
         "baseline": bare, "note": "baseline: one sqlite3 transaction per step writing its messages and run row"},
        {"benchmark": bench, "metric": "SQLite transactions per run", "value": per_run, "unit": "BEGINs",
         "note": f"{TURNS} steps; goal ~1 per step"},
    ]  # fmt: skip


async def _in_memory() -> dict[str, Any]:
    """Runs/s in memory with agno's rate for the same runs as the baseline (when the ``bench`` extra is installed),
    best of three rounds taken in turn so that both see the same noise."""
    try:
        from bench import agno_baseline
    except ImportError:
        agno_baseline = None
    await _rate(_runtime(), 50)  # warm-up
    if agno_baseline is not None:
        await agno_baseline.rate(agno_baseline.agent(), 50)
    ours: list[float] = []
    agno: list[float] = []
    for _ in range(3):
        ours.append(await _rate(_runtime(), 300))
        if agno_baseline is not None:
            agno.append(await agno_baseline.rate(agno_baseline.agent(), 300))
    row = {"benchmark": "runtime: 10-turn run, 1 tool call/turn", "metric": "runs/s in memory (no sink)",
           "value": max(ours), "unit": "runs/s"}  # fmt: skip
    if not agno:
        return row | {"note": "goal >= 2x agno: not measured, agno is missing (the `bench` extra; `make bench` has it)"}
    return row | {"baseline": max(agno), "note": "baseline: agno, the same runs (agno_baseline.py); goal >= 2x agno"}


async def run() -> list[dict[str, Any]]:
    in_memory = await _in_memory()

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
        in_memory,
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
            "note": "goal <= 22 KB",
        },
        *await _sqlite_figures(),
    ]

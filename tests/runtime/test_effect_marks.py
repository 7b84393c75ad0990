"""The effect ledger's marks and the transactions of a run on SQLite (issue 16): a tool that changes something is
marked ``started`` before it runs and settled by the checkpoint that appends its result; a read-only tool and a
memory store need no mark; a run writes one transaction per step, its last step's with the run's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from awaken_stdio.contract.mailbox import EffectRecord
from awaken_stdio.contract.stores import Store
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import ToolCallContext, ToolDescriptor, ToolResult
from awaken_stdio.stores import open_store
from tests.runtime.helpers import FnTool, call, make_runtime, turn

pytestmark = pytest.mark.anyio


async def begins(store: Store) -> list[str]:
    """The SQLite store's BEGIN statements from now on (both of its connections, on aiosqlite's threads)."""
    seen: list[str] = []

    def trace(sql: str) -> None:
        if sql.startswith("BEGIN"):
            seen.append(sql)

    for db in (store._writer, store._reader):  # type: ignore[attr-defined]
        await db._execute(db._conn.set_trace_callback, trace)
    return seen


async def ledger(store: Store, thread: str, call_id: str) -> list[EffectRecord]:
    return await store.mailbox.open_effects(thread, [call_id])


async def test_a_write_is_marked_before_it_runs_and_settled_with_its_result(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        seen: list[list[EffectRecord]] = []

        async def write(args: dict[str, Any], ctx: ToolCallContext) -> str:
            seen.append(await ledger(store, ctx.thread_id, ctx.call_id))
            return "written"

        runtime = make_runtime([turn("", call("write", id="c1")), turn("done")], tools=[FnTool("write", write)],
                               store=store)  # fmt: skip
        result = await runtime.run("go")
        assert result.status == "completed"
        assert [(e.call_id, e.status) for e in seen[0]] == [("c1", "started")]  # durable before the tool ran
        settled = await ledger(store, result.thread_id, "c1")
        assert [(e.call_id, e.status) for e in settled] == [("c1", "finished")]


async def test_a_read_only_tool_and_a_memory_store_leave_no_mark(tmp_path: Path) -> None:
    reader = FnTool("read")
    reader.descriptor = ToolDescriptor("read", "Reads.", read_only=True)
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime([turn("", call("read", id="c1")), turn("done")], tools=[reader], store=store)
        result = await runtime.run("go")
        assert reader.calls and await ledger(store, result.thread_id, "c1") == []
    async with open_store("memory://") as store:
        runtime = make_runtime([turn("", call("write", id="c2")), turn("done")], tools=[FnTool("write")], store=store)
        result = await runtime.run("go")
        assert await ledger(store, result.thread_id, "c2") == []


async def test_a_ten_step_run_writes_one_transaction_a_step(tmp_path: Path) -> None:
    reader = FnTool("read")
    reader.descriptor = ToolDescriptor("read", "Reads.", read_only=True)
    turns = [turn(f"step {i}", call("read", {"i": i})) for i in range(9)] + [turn("done")]
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime(turns, tools=[reader], store=store, max_rounds=20)
        seen = await begins(store)
        result = await runtime.run("go")
        assert result.steps == 10 and len(seen) == 10  # nine step checkpoints, the last step's with the end


async def test_a_call_that_asks_for_a_decision_is_not_asked_again_as_unknown(tmp_path: Path) -> None:
    """A pending result never reaches the conversation: its own finished mark settles the call."""

    async def ask(args: dict[str, Any], ctx: ToolCallContext) -> Any:
        if ctx.resume_input is None:
            return ToolResult.suspended("ask", message="Which one?")
        return f"chose {ctx.resume_input.result}"

    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        tool = FnTool("ask", ask)
        runtime = make_runtime([turn("", call("ask", id="c1")), turn("done")], tools=[tool], store=store)
        waiting = await runtime.run("go")
        assert waiting.status == "waiting" and waiting.pending[0].reason != "unknown_after_crash"
        done = await runtime.resume(waiting.run_id, [(waiting.pending[0].ticket_id, ToolCallResume.approve("b"))])
        assert done.status == "completed" and len(tool.calls) == 2

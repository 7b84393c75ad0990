"""The effect ledger's marks and the transactions of a run on SQLite (issue 16): a tool that changes something is
marked ``started`` before it runs and settled by the checkpoint that appends its result; a read-only tool and a
memory store need no mark; a run writes at most one transaction per step, its last step's with the run's end, the
step ends reached while a write is in flight coalesced into the next, and all of them in the store before a tool
that changes something runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.errors import InvalidResume, StoreError
from awaken_stdio.contract.ids import new_id
from awaken_stdio.contract.mailbox import EffectRecord
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Store
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import ToolCallContext, ToolDescriptor, ToolResult
from awaken_stdio.runtime.run import finish
from awaken_stdio.runtime.run.behind import WriteBehind
from awaken_stdio.stores import open_store
from tests.runtime.helpers import FnTool, call, make_runtime, turn

pytestmark = pytest.mark.anyio


async def begins(store: Store) -> list[str]:
    """The SQLite store's BEGIN statements from now on (both of its connections, each on its own thread)."""
    seen: list[str] = []

    def trace(sql: str) -> None:
        if sql.startswith("BEGIN"):
            seen.append(sql)

    for db in (store._writer, store._reader):  # type: ignore[attr-defined]
        await db.call(lambda conn: conn.set_trace_callback(trace))
    return seen


def count_reads(store: Store) -> list[object]:
    """Every transaction on the SQLite store's reader connection from now on."""
    seen: list[object] = []
    read = store._read  # type: ignore[attr-defined]

    async def counted(fn: Any, **kwargs: Any) -> Any:
        seen.append(fn)
        return await read(fn, **kwargs)

    store._read = counted  # type: ignore[attr-defined]
    return seen


async def ledger(store: Store, thread: str, call_id: str) -> list[EffectRecord]:
    """The call's open entry in the effect ledger (none once its result is checkpointed)."""
    return [e for e in await store.mailbox.open_effects(thread) if e.call_id == call_id]


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
        assert await ledger(store, result.thread_id, "c1") == []  # settled by the checkpoint with its result


async def test_a_read_only_tool_and_a_memory_store_leave_no_mark(tmp_path: Path) -> None:
    reader = _reader()
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime([turn("", call("read", id="c1")), turn("done")], tools=[reader], store=store)
        result = await runtime.run("go")
        assert reader.calls and await ledger(store, result.thread_id, "c1") == []
    async with open_store("memory://") as store:
        runtime = make_runtime([turn("", call("write", id="c2")), turn("done")], tools=[FnTool("write")], store=store)
        result = await runtime.run("go")
        assert await ledger(store, result.thread_id, "c2") == []


def _reader() -> FnTool:
    reader = FnTool("read")
    reader.descriptor = ToolDescriptor(name="read", description="Reads.", read_only=True)
    return reader


async def test_a_ten_step_run_coalesces_its_step_writes(tmp_path: Path) -> None:
    turns = [turn(f"step {i}", call("read", {"i": i})) for i in range(9)] + [turn("done")]
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime(turns, tools=[_reader()], store=store, max_rounds=20)
        seen = await begins(store)
        result = await runtime.run("go")
        # the step ends met while a write is in flight (or before it starts) ride with the next: here the model
        # and the tool never wait, so the run's end carries all ten steps in one write
        assert result.steps == 10 and len(seen) == 1, seen
        stored = await store.load_messages(result.thread_id)
        assert len(stored) == 1 + 9 * 2 + 1 and stored[-1].text == "done"
        record = await store.load_run(result.run_id)
        assert record is not None and record.status == "done" and record.steps == 10


async def test_a_step_is_stored_while_a_slow_model_thinks_about_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(finish, "WRITE_BEHIND_AFTER_S", 0.005)  # a model slower than the wait for a write
    turns = [turn(f"step {i}", call("read", {"i": i}), delay_ms=40) for i in range(4)] + [turn("done", delay_ms=40)]
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime(turns, tools=[_reader()], store=store)
        seen = await begins(store)
        result = await runtime.run("go")
        assert result.steps == 5 and len(seen) == 5, seen  # four steps behind the loop, the fifth with the end


async def test_the_writes_behind_run_in_the_run_s_own_task_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(finish, "WRITE_BEHIND_AFTER_S", 0.005)
    turns = [turn("step", call("read", {}), delay_ms=40), turn("done", delay_ms=40)]
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime(turns, tools=[_reader()], store=store)
        tasks: list[anyio.TaskInfo] = []  # the task each checkpoint ran in
        checkpoint = store.checkpoint

        async def traced(cp: Any) -> None:
            tasks.append(anyio.get_current_task())
            await checkpoint(cp)

        store.checkpoint = traced  # type: ignore[method-assign]
        await runtime.run("go")
        here = anyio.get_current_task().id
        # the step behind the loop in a task the run started in its own group; the run's end in the run's task
        assert [(t.id == here, t.parent_id == here) for t in tasks] == [(False, True), (True, False)], tasks


async def test_read_only_steps_of_a_model_that_answers_soon_write_nothing_until_the_end(tmp_path: Path) -> None:
    turns = [turn(f"step {i}", call("read", {"i": i}), delay_ms=1) for i in range(9)] + [turn("done", delay_ms=1)]
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime(turns, tools=[_reader()], store=store, max_rounds=20)
        seen = await begins(store)
        result = await runtime.run("go")
        assert result.steps == 10 and len(seen) == 1, seen  # the model yields, yet no step end is written alone


async def test_a_ten_step_run_of_a_tool_that_changes_something_writes_once_per_step(tmp_path: Path) -> None:
    turns = [turn(f"step {i}", call("write", {"i": i}), delay_ms=1) for i in range(9)] + [turn("done", delay_ms=1)]
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime(turns, tools=[FnTool("write")], store=store, max_rounds=20)
        seen = await begins(store)
        result = await runtime.run("go")
        # nine checkpoints, each carrying a call's start mark and settling the call before it, and the run's end
        assert result.steps == 10 and len(seen) == 10, seen
        assert await store.mailbox.open_effects(result.thread_id) == []


async def test_the_steps_behind_are_stored_before_a_tool_that_changes_something_runs(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        stored_when_run: list[int] = []

        async def write(args: dict[str, Any], ctx: ToolCallContext) -> str:
            stored_when_run.append(len(await store.load_messages(ctx.thread_id)))
            return "written"

        turns = [turn(f"step {i}", call("read", {"i": i})) for i in range(3)]
        turns += [turn("now", call("write", id="w1")), turn("done")]
        runtime = make_runtime(turns, tools=[_reader(), FnTool("write", write)], store=store)
        result = await runtime.run("go")
        assert result.status == "completed"
        # the prompt, three read steps, and its own step (stored with its mark): no call runs unseen by the store
        assert stored_when_run == [1 + 3 * 2 + 1]


async def test_a_step_write_that_fails_fails_the_run_before_anything_changes(tmp_path: Path) -> None:
    """The store refuses the second step's messages (a real SQLite error, raised by a trigger): the run fails with
    it, and the tool that would change something, two steps later, never runs."""
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        await store._writer.call(  # type: ignore[attr-defined]
            lambda conn: conn.execute(
                "CREATE TEMP TRIGGER refuse BEFORE INSERT ON messages WHEN NEW.seq >= 3 "
                "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
            )
        )
        writer = FnTool("write")
        turns = [turn(f"step {i}", call("read", {"i": i})) for i in range(3)]
        turns += [turn("now", call("write")), turn("done")]
        runtime = make_runtime(turns, tools=[_reader(), writer], store=store)
        with pytest.raises(StoreError, match="disk is full"):
            await runtime.run("go")
        assert writer.calls == []


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


async def test_a_run_id_is_looked_up_unless_it_was_made_just_now(tmp_path: Path) -> None:
    """A caller's own run id is checked against the store (a used one is refused); one its caller made just now
    (``run_id_is_new``, as the dispatcher and the ACP server do) costs no read."""
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime([turn("one"), turn("two"), turn("three")], store=store)
        await runtime.run(RunActivation(messages=[Message.user("go")], thread_id="t1", run_id="r1"))
        with pytest.raises(InvalidResume, match="already used"):
            await runtime.run(RunActivation(messages=[Message.user("go")], thread_id="t2", run_id="r1"))
        lookups: list[str] = []
        await store._reader.call(  # type: ignore[attr-defined]
            lambda conn: conn.set_trace_callback(
                lambda sql: lookups.append(sql) if "FROM runs WHERE run_id" in sql else None
            )
        )
        done = await runtime.run(
            RunActivation(messages=[Message.user("go")], thread_id="t3", run_id=new_id(), run_id_is_new=True)
        )
        assert done.status == "completed" and lookups == []


async def test_a_call_left_unknown_by_a_recovery_that_died_is_offered_again(tmp_path: Path) -> None:
    """A process died running a first step's call (marked, its step never stored), the next one marked it unknown
    and died too before asking: the call is still offered for approval, with the conversation it never reached,
    and the model is not asked to go on without it (a new prompt would supersede it; a continuation must not)."""
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        await store.mailbox.effect_started(
            EffectRecord(
                thread_id="t1", call_id="c9", run_id="r-dead", tool_name="write", arguments={"line": "x"}, started_at=1
            )
        )
        await store.mailbox.mark_effects_unknown("t1", ["c9"], 2)
        runtime = make_runtime([turn("I went on regardless")], tools=[FnTool("write")], store=store)
        result = await runtime.run(RunActivation(messages=[], thread_id="t1"))
        assert result.status == "waiting" and [p.tool_call_id for p in result.pending] == ["c9"]
        loaded = await store.load_thread("t1")
        assert loaded is not None and [c.id for m in loaded.messages for c in m.tool_calls] == ["c9"]


async def test_a_run_on_a_stored_thread_reads_it_and_its_ledger_in_one_round_trip(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime = make_runtime([turn("one"), turn("two")], store=store)
        await runtime.run(RunActivation(messages=[Message.user("go")], thread_id="t1"))
        hops = count_reads(store)
        done = await runtime.run(RunActivation(messages=[Message.user("again")], thread_id="t1"))
        assert done.status == "completed" and done.response == "two" and len(hops) == 1


async def test_a_writer_dropped_before_it_started_wakes_whoever_waits_for_it() -> None:
    """A flush waiting for a scheduled writer must not hang when another checkpoint supersedes that writer."""
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            behind = WriteBehind(write=lambda _: anyio.sleep(0), tasks=tg)
            behind.schedule(3600)  # scheduled, not started
            tg.start_soon(behind.wait)
            await anyio.wait_all_tasks_blocked()
            behind.unschedule()
    assert not behind.busy

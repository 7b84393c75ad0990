"""A decider that must wait for its own row, made deterministic: the poller of its own process never runs that row
behind its back, a decision for a run still finishing its step here returns only once the run has taken it, and a
decider that follows a run held here is told where it went (or runs the row itself when the holder let go)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from awaken_stdio.app.dispatch import MailboxConfig, MailboxService
from awaken_stdio.contract.activation import AgentRunResult, RunActivation
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Store
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import ToolCallContext
from awaken_stdio.stores.memory import MemoryStore
from tests.mailbox.test_service import APPROVE, guarded, serving, until
from tests.runtime.helpers import AskPermission, FnTool, call, make_runtime, turn

pytestmark = pytest.mark.anyio


def go() -> RunActivation:
    return RunActivation(messages=[Message.user("go")], thread_id="t", wait_for_decisions=True)


def two_calls(c1_done: anyio.Event) -> tuple[MailboxService, FnTool, FnTool]:
    """A service whose run asks about two calls at once: ``first`` (``c1``) runs until ``c1_done``, ``second``
    (``c2``) at once."""

    async def slow(args: dict[str, Any], ctx: ToolCallContext) -> Any:
        await c1_done.wait()
        return "slow done"

    first, second = FnTool("first", slow), FnTool("second")
    runtime = make_runtime(
        [turn("", call("first", id="c1"), call("second", id="c2")), turn("done")],
        tools=[first, second],
        plugins=[AskPermission()],
    )
    config = MailboxConfig(poll_every_s=0.01, renew_every_s=0.05, lease_ms=2_000)
    return MailboxService(runtime=runtime, config=config), first, second


async def test_the_deciders_own_poller_leaves_its_row_alone() -> None:
    """The holder (another process) pauses past its lease while a decider here waits for it. The poller here runs
    between the lapse and the decider's next look: without the guard it would claim the row and run the tool, and
    the decider, seeing its row claimed by its own process, would run it again."""
    store = MemoryStore()
    gate = anyio.Event()

    async def blocks(args: dict[str, Any], ctx: ToolCallContext) -> Any:
        await gate.wait()
        return "done"

    holder_runtime, _ = guarded(store)
    tool = FnTool("guarded", blocks)
    decider_runtime = make_runtime(
        [turn("", call("guarded", id="c1")), turn("done")], tools=[tool], plugins=[AskPermission()], store=store
    )
    holder = MailboxService(
        runtime=holder_runtime, config=MailboxConfig(poll_every_s=0.01, renew_every_s=0.05, lease_ms=300)
    )
    # the decider looks at its row once a second; its process's sweep runs only when the test says so
    slow = MailboxConfig(poll_every_s=1.0, sweep_every_s=100.0, renew_every_s=0.05, lease_ms=5_000)
    decider = MailboxService(runtime=decider_runtime, config=slow)
    results: list[AgentRunResult | None] = []

    async def hold() -> None:
        await holder.submit(go())

    async with anyio.create_task_group() as outer:
        async with serving(holder):
            outer.start_soon(hold)
            await until(lambda: _waiting(store))
        # the holder's process is paused from here on: it neither renews nor polls, its run still waits
        run_id = await _run_id(store)
        async with serving(decider):

            async def decide() -> None:
                results.append(await decider.decide(run_id, APPROVE))

            started = time.monotonic()
            outer.start_soon(decide)
            await until(lambda: _rows(store, "decide", "queued"))
            await anyio.sleep(max(0.0, started + 0.6 - time.monotonic()))  # the holder's lease has lapsed by now
            await decider.sweep()
            await decider.poll()
            await anyio.sleep(max(0.0, started + 1.5 - time.monotonic()))  # past the decider's next look
            gate.set()
            await until(lambda: _len(results))
        outer.cancel_scope.cancel()

    assert results[0] is not None and results[0].status == "completed"
    assert len(tool.calls) == 1


async def test_a_decision_for_a_run_still_busy_here_returns_once_taken() -> None:
    """Two calls wait; ``c1`` is approved and runs (slowly) while the run still waits for ``c2``. A decision for
    ``c2`` taken here now cannot be handed over yet: it returns only once the run, waiting again, took it over, and
    each call runs once."""
    c1_done = anyio.Event()
    service, first, second = two_calls(c1_done)
    runtime = service.runtime
    finished: list[AgentRunResult] = []
    decided: list[object] = []

    async def hold() -> None:
        finished.append(await service.submit(go()))

    async def decide(run_id: str, call_id: str) -> None:
        decided.append(await service.decide(run_id, [(f"perm_{call_id}", ToolCallResume.approve())]))

    async with serving(service), anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await until(lambda: _waiting(runtime.store))
        run_id = await _run_id(runtime.store)
        tg.start_soon(decide, run_id, "c1")
        await until(lambda: _called(first))
        assert (await _status(runtime.store, run_id)) == "waiting"
        tg.start_soon(decide, run_id, "c2")
        await until(lambda: _rows(runtime.store, "decide", "queued"))
        await anyio.sleep(0.3)
        assert decided == [None]  # c2's decision is recorded, but the run has not taken it: not "done" yet
        c1_done.set()
        await until(lambda: _count(decided, 2))
        rows = await runtime.store.mailbox.list_dispatches("t")
        assert all(r.status != "queued" for r in rows)
        await until(lambda: _len(finished))

    assert decided == [None, None] and finished[0].status == "completed"
    assert len(first.calls) == 1 and len(second.calls) == 1


async def test_a_followed_decision_for_a_run_waiting_here_returns_where_the_run_went() -> None:
    """The run waits in this process's holder; a decider here that follows it gets the run's result once it has
    run the approved call, not the ``None`` of the hand-over instant (when the store still says "waiting")."""
    runtime, tool = guarded()
    service = MailboxService(
        runtime=runtime, config=MailboxConfig(poll_every_s=0.01, renew_every_s=0.05, lease_ms=2_000)
    )
    async with serving(service), anyio.create_task_group() as tg:
        tg.start_soon(service.submit, go())
        await until(lambda: _waiting(runtime.store))
        result = await service.decide(await _run_id(runtime.store), APPROVE, follow=True)
    assert result is not None and result.status == "completed"
    assert len(tool.calls) == 1


async def test_a_decision_the_busy_holder_lets_go_of_is_run_by_its_decider() -> None:
    """The process's worker resumes the run for a decision recorded elsewhere (``c1``, slow) and does not wait for
    more. A decision for ``c2`` taken here meanwhile is left to it, but the worker ends with the run waiting again
    without taking it: the decider then claims its own row and runs it, and says so with the run's result."""
    c1_done = anyio.Event()
    service, first, second = two_calls(c1_done)
    runtime = service.runtime
    waiting = await service.submit(RunActivation(messages=[Message.user("go")], thread_id="t"))
    assert waiting.status == "waiting" and {t.tool_call_id for t in waiting.pending} == {"c1", "c2"}
    record = await service.waiting(waiting.run_id)
    elsewhere = [("perm_c1", ToolCallResume.approve())]
    decided: list[AgentRunResult | None] = []

    async def decide_c2() -> None:
        decided.append(await service.decide(waiting.run_id, [("perm_c2", ToolCallResume.approve())], follow=True))

    async with serving(service), anyio.create_task_group() as tg:
        request = service._request("decide", record, elsewhere, "cli")  # pyright: ignore[reportPrivateUsage]
        await runtime.store.mailbox.enqueue(service._new("t", waiting.run_id, request, 64))  # pyright: ignore[reportPrivateUsage]
        await until(lambda: _called(first))  # the worker holds the thread, busy with c1
        tg.start_soon(decide_c2)
        await until(lambda: _rows(runtime.store, "decide", "queued"))
        c1_done.set()
        await until(lambda: _len(decided))

    assert decided[0] is not None and decided[0].status == "completed"
    assert len(first.calls) == 1 and len(second.calls) == 1


async def _waiting(store: Store) -> bool:
    latest = await store.latest_run("t")
    return latest is not None and latest.status == "waiting"


async def _run_id(store: Store) -> str:
    latest = await store.latest_run("t")
    assert latest is not None
    return latest.run_id


async def _status(store: Store, run_id: str) -> str:
    record = await store.load_run(run_id)
    assert record is not None
    return record.status


async def _rows(store: Any, kind: str, status: str) -> bool:
    return any(r.request.kind == kind and r.status == status for r in await store.mailbox.list_dispatches("t"))


async def _called(tool: FnTool) -> bool:
    return bool(tool.calls)


async def _len(items: list[Any]) -> bool:
    return bool(items)


async def _count(items: list[Any], n: int) -> bool:
    return len(items) >= n

"""The mailbox service in one process: recovery, claims, live take-over of decisions, cancel, error classes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from awaken_stdio.app.claims import classify_error, owner_is_dead
from awaken_stdio.app.dispatch import MailboxConfig, MailboxService
from awaken_stdio.contract.activation import AgentRunResult, RunActivation
from awaken_stdio.contract.errors import (
    AgentNotFound,
    DecisionTargetNotFound,
    InvalidResume,
    ProviderError,
    StoreUnavailable,
    ThreadAlreadyRunning,
)
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.mailbox import DispatchRequest, RunDispatch
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, LoadedThread, Store
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.runtime.runtime_keys import TOOL_CALL_STATES
from awaken_stdio.stores.memory import MemoryStore
from tests.runtime.helpers import AskPermission, FnTool, call, make_runtime, turn

pytestmark = pytest.mark.anyio

FAST = MailboxConfig(poll_every_s=0.01, sweep_every_s=0.05, renew_every_s=0.05, lease_ms=200)
APPROVE = [("perm_c1", ToolCallResume.approve())]


def guarded(store: Store | None = None) -> tuple[AgentRuntime, FnTool]:
    tool = FnTool("guarded")
    runtime = make_runtime(
        [turn("", call("guarded", id="c1")), turn("done")], tools=[tool], plugins=[AskPermission()], store=store
    )
    return runtime, tool


@asynccontextmanager
async def serving(service: MailboxService) -> AsyncIterator[MailboxService]:
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            yield service
            tg.cancel_scope.cancel()


async def until(check: object) -> None:
    """Wait (bounded) until ``check()`` is true: the service works on its own schedule."""
    with anyio.fail_after(5):
        while not await check():  # type: ignore[operator]
            await anyio.sleep(0.01)


def go(**kw: object) -> RunActivation:
    return RunActivation(messages=[Message.user("go")], thread_id="t", **kw)  # type: ignore[arg-type]


async def test_a_decision_resumes_a_waiting_run_here_once() -> None:
    runtime, tool = guarded()
    service = MailboxService(runtime=runtime, config=FAST)
    waiting = await service.submit(go())
    assert waiting.status == "waiting"

    done = await service.decide(waiting.run_id, APPROVE)

    assert done is not None and done.status == "completed" and len(tool.calls) == 1
    with pytest.raises(InvalidResume, match="was already decided by process"):
        await service.decide(waiting.run_id, APPROVE)
    rows = await runtime.store.mailbox.list_dispatches("t")
    assert [(r.request.kind, r.status, r.run_status) for r in rows] == [
        ("decide", "acked", "done"),
        ("run", "acked", "waiting"),
    ]


async def test_unknown_runs_and_targets_are_refused_before_anything_is_recorded() -> None:
    runtime, _ = guarded()
    service = MailboxService(runtime=runtime, config=FAST)
    with pytest.raises(InvalidResume, match="run nope not found"):
        await service.decide("nope", APPROVE)
    waiting = await service.submit(go())
    with pytest.raises(DecisionTargetNotFound):
        await service.decide(waiting.run_id, [("c9", ToolCallResume.approve())])
    assert len(await runtime.store.mailbox.list_dispatches("t")) == 1


async def test_a_run_waiting_live_takes_over_a_decision_recorded_by_another_process() -> None:
    store = MemoryStore()
    holder_runtime, tool = guarded(store)
    other_runtime, other_tool = guarded(store)
    holder, other = (
        MailboxService(runtime=holder_runtime, config=FAST),
        MailboxService(runtime=other_runtime, config=FAST),
    )
    results: list[AgentRunResult] = []

    async def hold() -> None:
        results.append(await holder.submit(go(wait_for_decisions=True)))

    async with serving(holder), anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await until(lambda: _waiting(store))
        run_id = (await store.latest_run("t")).run_id  # type: ignore[union-attr]
        assert await other.decide(run_id, APPROVE) is None  # recorded here, continued by the holder
        await until(lambda: _done(results))

    assert results[0].status == "completed" and len(tool.calls) == 1 and other_tool.calls == []


async def test_startup_recovery_runs_queued_work_and_requeues_expired_claims() -> None:
    runtime, tool = guarded()
    waiting = await runtime.run_to_completion(go())
    mb = runtime.store.mailbox
    decide = DispatchRequest(kind="decide", decisions=tuple(APPROVE))
    await mb.enqueue(RunDispatch(dispatch_id=new_id(), thread_id="t", run_id=waiting.run_id, request=decide))
    expired = await mb.enqueue_and_claim(
        RunDispatch(dispatch_id=new_id(), thread_id="t2", run_id="r2"), "gone", 1, now_ms() - 10
    )
    assert expired is not None and expired.status == "claimed"

    async with serving(MailboxService(runtime=runtime, config=FAST)):
        await until(lambda: _status(runtime, waiting.run_id, "done"))
        await until(lambda: _row_status(runtime, expired.dispatch_id, "acked"))
    assert len(tool.calls) == 1


async def test_a_dead_local_owner_is_requeued_at_once() -> None:
    runtime, tool = guarded()
    waiting = await runtime.run_to_completion(go())
    dead = "nohost:1:x"
    assert not owner_is_dead(dead)  # another host's process is never judged dead
    import socket
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = f"{socket.gethostname()}:{int(child.stdout)}:x"
    assert owner_is_dead(dead)
    held = await runtime.store.mailbox.enqueue_and_claim(
        RunDispatch(dispatch_id=new_id(), thread_id="t", run_id=waiting.run_id), dead, 600_000, now_ms()
    )
    assert held is not None

    done = await MailboxService(runtime=runtime, config=FAST).decide(waiting.run_id, APPROVE)

    assert done is not None and done.status == "completed" and len(tool.calls) == 1


async def test_cancel_ends_a_run_waiting_in_the_store() -> None:
    runtime, tool = guarded()
    service = MailboxService(runtime=runtime, config=FAST)
    waiting = await service.submit(go())

    assert await service.cancel(waiting.run_id)

    record = await runtime.store.load_run(waiting.run_id)
    assert record is not None and record.display_status == "cancelled" and record.waiting is None
    assert not await service.cancel(waiting.run_id) and tool.calls == []
    again = await service.submit(RunActivation(messages=[Message.user("again")], thread_id="t"))
    assert again.status == "completed"  # the thread goes on (the script has moved to its next turn)


class AppendsAfterARead(MemoryStore):
    """Another writer appends to a thread right after the next read of it (once ``armed``): the race between
    reading a thread and writing a checkpoint on it."""

    armed = False

    async def load_thread(self, thread_id: str) -> LoadedThread | None:
        loaded = await super().load_thread(thread_id)
        if self.armed and loaded is not None and loaded.latest_run is not None:
            self.armed = False
            meanwhile = [Message.user("meanwhile")]
            await self.checkpoint(
                Checkpoint(
                    thread_id=thread_id,
                    expected_message_count=loaded.thread.message_count,
                    messages=meanwhile,
                    run=loaded.latest_run,
                )
            )
        return loaded


async def test_a_cancel_racing_another_writers_append_still_cancels() -> None:
    store = AppendsAfterARead()
    runtime, tool = guarded(store)
    service = MailboxService(runtime=runtime, config=FAST)
    waiting = await service.submit(go())
    store.armed = True

    assert await service.cancel(waiting.run_id)  # its checkpoint lost the race once, then went after the append

    assert not store.armed
    record = await store.load_run(waiting.run_id)
    assert record is not None and record.display_status == "cancelled" and record.waiting is None
    loaded = await store.load_thread("t")
    assert loaded is not None and [m.text for m in loaded.messages[-2:]] == [
        "meanwhile",
        "[tool call cancelled with the run]",
    ]
    states = TOOL_CALL_STATES.decode(loaded.state.extensions[TOOL_CALL_STATES.key] if loaded.state else None)
    assert states["c1"].status == "cancelled" and tool.calls == []


async def test_a_second_run_on_a_held_thread_is_refused() -> None:
    runtime, _ = guarded()
    service = MailboxService(runtime=runtime, config=FAST)
    await runtime.store.mailbox.enqueue_and_claim(
        RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r0"), "someone", 60_000, now_ms()
    )
    with pytest.raises(ThreadAlreadyRunning):
        await service.submit(go())


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (InvalidResume("x"), "ok"),
        (DecisionTargetNotFound("x"), "ok"),
        (AgentNotFound("a"), "permanent"),
        (ProviderError("invalid_request", "bad"), "permanent"),
        (ProviderError("context_overflow", "big"), "permanent"),
        (ProviderError("rate_limited", "429"), "transient"),
        (StoreUnavailable("down"), "transient"),
        (ThreadAlreadyRunning("t"), "transient"),
        (RuntimeError("untyped"), "transient"),
    ],
)
def test_classify_error(error: Exception, expected: str) -> None:
    assert classify_error(error) == expected


async def _waiting(store: Store) -> bool:
    run = await store.latest_run("t")
    return run is not None and run.status == "waiting"


async def _done(results: list[AgentRunResult]) -> bool:
    return bool(results)


async def _status(runtime: AgentRuntime, run_id: str, status: str) -> bool:
    run = await runtime.store.load_run(run_id)
    return run is not None and run.status == status


async def _row_status(runtime: AgentRuntime, dispatch_id: str, status: str) -> bool:
    row = await runtime.store.mailbox.load_dispatch(dispatch_id)
    return row is not None and row.status == status

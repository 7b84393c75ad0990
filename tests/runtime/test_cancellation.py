"""Cancellation: a cancelled run stops promptly wherever it is, its tool tasks are cancelled too, what was streamed
is kept, the run is recorded cancelled, and the thread is served again afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from awaken_stdio.contract.activation import AgentRunResult, RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.events import ActivitySnapshot, RunFinish, StepStart, TextDelta
from awaken_stdio.contract.inference import InferenceRequest
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.tools import ToolCallContext
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.runtime.executors import INTERRUPTED
from tests.runtime.helpers import (
    AskPermission,
    FnTool,
    Recorder,
    RequestLog,
    StallingModel,
    call,
    make_runtime,
    model,
    tool_messages,
    turn,
)

pytestmark = pytest.mark.anyio

SLOW_MS = 10_000
PROMPT_S = 1.0  # "promptly": a tenth of the delay, with room for a loaded machine


@asynccontextmanager
async def cancelled_run(
    runtime: AgentRuntime, rec: Recorder, text: str = "slow"
) -> AsyncIterator[list[AgentRunResult]]:
    """Starts a run on thread ``t``; the block cancels it; the list then holds the result, which must arrive within
    PROMPT_S of the block's end."""
    results: list[AgentRunResult] = []
    done = anyio.Event()

    async def go() -> None:
        results.append(await runtime.run(RunActivation(messages=[Message.user(text)], thread_id="t"), rec))
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        with anyio.fail_after(5):
            yield results
        with anyio.fail_after(PROMPT_S):
            await done.wait()


def slow_unless_again(request: InferenceRequest, index: int) -> dict[str, Any]:
    """Takes SLOW_MS to answer "slow"; answers anything else at once."""
    if request.messages[-1].text == "slow":
        return turn("too late", delay_ms=SLOW_MS)
    return turn("served again")


async def assert_cancelled_and_thread_served_again(
    runtime: AgentRuntime, result: AgentRunResult, rec: Recorder
) -> None:
    assert (result.termination, result.status) == (TerminationReason.cancelled(), "cancelled")
    finish = rec.events[-1]
    assert isinstance(finish, RunFinish) and finish.termination == TerminationReason.cancelled()
    assert finish.result is not None and finish.result.status == "cancelled"
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and record.status == "done" and record.display_status == "cancelled"
    assert not runtime.is_running(result.thread_id)
    again = await runtime.run_to_completion(RunActivation(messages=[Message.user("again")], thread_id=result.thread_id))
    assert again.termination == TerminationReason.natural()


@pytest.mark.parametrize("by", ["thread", "run"])
async def test_a_run_cancelled_while_the_model_is_slow_stops_promptly(by: str) -> None:
    runtime = make_runtime(slow_unless_again)
    rec = Recorder()

    async with cancelled_run(runtime, rec) as results:
        start = await rec.wait_for(StepStart)
        run_id = runtime.active_run_id("t")
        assert run_id is not None
        assert await runtime.cancel("t" if by == "thread" else run_id)

    (result,) = results
    assert start.step == 1 and result.run_id == run_id
    await assert_cancelled_and_thread_served_again(runtime, result, rec)


async def test_text_streamed_before_a_cancel_is_kept_as_an_interrupted_message() -> None:
    runtime = make_runtime(slow_unless_again)
    stalling = StallingModel("Let me ", "think")
    runtime.add_model("default", stalling)
    rec = Recorder()

    async with cancelled_run(runtime, rec) as results:
        await rec.wait_for(TextDelta, 2)
        await runtime.cancel("t")

    assert stalling.cancelled
    loaded = await runtime.store.load_thread("t")
    assert loaded is not None
    last = loaded.messages[-1]
    assert (last.role, last.text, last.interrupted, last.run_id) == (
        "assistant",
        "Let me think",
        True,
        results[0].run_id,
    )
    runtime.add_model("default", model(slow_unless_again))
    await assert_cancelled_and_thread_served_again(runtime, results[0], rec)


@pytest.mark.parametrize("executor", ["sequential", "parallel"])
async def test_a_run_cancelled_during_a_slow_tool_cancels_the_tool_task(executor: str) -> None:
    started: list[str] = []
    cancelled: list[str] = []
    all_started = anyio.Event()
    expected = 2 if executor == "parallel" else 1

    async def slow(args: dict[str, Any], ctx: ToolCallContext) -> str:
        started.append(ctx.call_id)
        if len(started) == expected:
            all_started.set()
        try:
            await anyio.sleep(SLOW_MS / 1000)
        except anyio.get_cancelled_exc_class():
            cancelled.append(ctx.call_id)
            raise
        return "finished"  # pragma: no cover - the run is cancelled first

    log = RequestLog([turn("working", call("slow", id="c1"), call("slow", id="c2")), turn("served again")])
    runtime = make_runtime(log, tools=[FnTool("slow", slow)], tool_executor=executor)
    rec = Recorder()

    async with cancelled_run(runtime, rec) as results:
        await all_started.wait()
        await runtime.cancel("t")

    assert sorted(cancelled) == started == ["c1", "c2"][:expected]
    assert "tool_call_done" not in rec.types()
    (result,) = results
    assert result.response == "working"
    await assert_cancelled_and_thread_served_again(runtime, result, rec)
    # the next request still answers every call of the cancelled step, so providers accept the history
    assert tool_messages(log.requests[-1]) == {"c1": INTERRUPTED, "c2": INTERRUPTED}


async def test_cancelling_a_delegating_run_cancels_the_child_run() -> None:
    helper = AgentSpec(id="helper", model="helper-model")
    runtime = make_runtime(
        [turn("", call("agent_run_helper", {"prompt": "slow"}, id="d1")), turn("served again")],
        delegates=["helper"],
        agents=[(helper, slow_unless_again)],
    )
    rec = Recorder()

    async with cancelled_run(runtime, rec, "delegate") as results:
        await rec.wait_for(ActivitySnapshot)
        assert await runtime.cancel("t")

    (child,) = [r for r in (await runtime.store.list_runs()).items if r.origin == "delegate"]
    assert child.display_status == "cancelled" and child.parent_run_id == results[0].run_id
    assert not runtime.is_running(child.thread_id)
    assert results[0].termination == TerminationReason.cancelled()


async def test_a_run_whose_caller_is_cancelled_is_recorded_cancelled() -> None:
    runtime = make_runtime(slow_unless_again)
    rec = Recorder()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run, RunActivation(messages=[Message.user("slow")], thread_id="t"), rec)
            await rec.wait_for(StepStart)
            run_id = runtime.active_run_id("t")
            tg.cancel_scope.cancel()

    assert run_id is not None and not runtime.is_running("t")
    record = await runtime.store.load_run(run_id)
    assert record is not None and record.display_status == "cancelled"


async def test_cancel_and_wait_returns_once_the_run_has_ended() -> None:
    runtime = make_runtime(slow_unless_again)
    rec = Recorder()

    async with cancelled_run(runtime, rec):
        await rec.wait_for(StepStart)
        assert await runtime.cancel_and_wait("t")
        assert not runtime.is_running("t")

    assert not await runtime.cancel("t")
    assert not await runtime.cancel_and_wait("t")
    assert not await runtime.cancel("no-such-run")


async def test_a_cancel_from_the_sink_while_the_run_reports_its_suspension_cancels_it() -> None:
    runtime = make_runtime([turn("", call("guarded", id="c1")), turn("done")], tools=[FnTool("guarded")])
    runtime.add_plugin(AskPermission())

    async def sink(event: object) -> None:
        if isinstance(event, RunFinish) and event.termination.type == "suspended":
            await runtime.cancel("t")  # e.g. the editor's answer was "cancelled"

    result = await runtime.run(RunActivation(messages=[Message.user("go")], thread_id="t"), sink)

    assert result.termination == TerminationReason.cancelled()
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and record.display_status == "cancelled"

"""Human in the loop, in-process: suspension, live decisions, partial and early decisions, frontend tools, and the
durable path (a waiting run continued later, by another runtime sharing the store)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from awaken_stdio.contract.activation import AgentRunResult, RunActivation
from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import DecisionTargetNotFound, InvalidResume
from awaken_stdio.contract.events import (
    AgentEvent,
    RunFinish,
    RunStart,
    StateSnapshot,
    StepStart,
    ToolCallDone,
    ToolCallResumed,
)
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import ToolCallContext, ToolDescriptor, ToolResult
from awaken_stdio.runtime.agent_runtime import AgentRuntime
from awaken_stdio.runtime.runtime_keys import TOOL_CALL_STATES, ToolCallState
from tests.runtime.helpers import (
    AskPermission,
    FnTool,
    Recorder,
    RequestLog,
    assert_well_formed,
    call,
    make_runtime,
    tool_messages,
    turn,
)

pytestmark = pytest.mark.anyio

APPROVE = ToolCallResume.approve()


def guarded_runtime(*calls: dict[str, Any], after: str = "done", **kw: Any) -> tuple[AgentRuntime, FnTool, RequestLog]:
    """An agent whose first turn makes ``calls`` (default one ``guarded`` call ``c1``), gated by AskPermission."""
    log = RequestLog([turn("checking", *(calls or (call("guarded", {"x": 1}, id="c1"),))), turn(after)])
    guarded = FnTool("guarded")
    runtime = make_runtime(log, tools=[guarded, FnTool("echo")], plugins=[AskPermission("guarded")], **kw)
    return runtime, guarded, log


def live(thread_id: str = "t", **kw: Any) -> RunActivation:
    return RunActivation(messages=[Message.user("go")], thread_id=thread_id, wait_for_decisions=True, **kw)


@asynccontextmanager
async def running(
    runtime: AgentRuntime, activation: RunActivation, rec: Recorder
) -> AsyncIterator[list[AgentRunResult]]:
    """Runs ``activation`` in the background; the list holds its result once the block exits."""
    results: list[AgentRunResult] = []

    async def go() -> None:
        results.append(await runtime.run(activation, rec))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            yield results


def is_suspended(e: RunFinish) -> bool:
    return e.termination == TerminationReason.suspended()


async def stored_call_states(runtime: AgentRuntime, thread_id: str) -> dict[str, ToolCallState]:
    loaded = await runtime.store.load_thread(thread_id)
    assert loaded is not None and loaded.state is not None
    return TOOL_CALL_STATES.decode(loaded.state.extensions[TOOL_CALL_STATES.key])


async def test_a_permission_suspension_reports_its_ticket_and_leaves_the_run_waiting() -> None:
    runtime, guarded, _ = guarded_runtime()
    rec = Recorder()

    result = await runtime.run(RunActivation(messages=[Message.user("go")], thread_id="t"), rec)

    assert guarded.calls == []
    done = rec.of(ToolCallDone)[0]
    assert (done.id, done.outcome, done.result.status) == ("c1", "suspended", "pending")
    assert done.result.message == "Tool 'guarded' suspended: awaiting approval"
    ticket = done.result.suspension
    assert ticket is not None
    assert (ticket.suspension.id, ticket.suspension.action) == ("perm_c1", "tool:PermissionConfirm")
    assert ticket.suspension.message == "Permission required for tool 'guarded'"
    assert (ticket.pending.id, ticket.pending.name, ticket.resume_mode) == (
        "perm_c1",
        "permission_confirm",
        "replay_tool_call",
    )
    types = rec.types()  # ToolCallDone(suspended), the step's end, then RunFinish(suspended) last
    assert types.index("tool_call_done") < types.index("step_end") < types.index("run_finish") == len(types) - 1
    finish = rec.events[-1]
    assert isinstance(finish, RunFinish) and is_suspended(finish)
    assert finish.result is not None and finish.result.status == "waiting"

    state = (await stored_call_states(runtime, "t"))["c1"]
    assert (state.status, state.suspension_id, state.suspension_reason) == (
        "suspended",
        "perm_c1",
        "tool:PermissionConfirm",
    )
    assert state.resume_mode == "replay_tool_call"
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and record.status == "waiting" and record.waiting is not None
    assert record.waiting.reason == "tool_permission" and record.waiting.ticket_ids == ["perm_c1"]
    (pending,) = record.waiting.tickets
    assert (pending.tool_call_id, pending.tool_name, pending.arguments) == ("c1", "guarded", {"x": 1})
    assert pending.reason == "tool:PermissionConfirm"
    assert (result.status, result.termination, result.pending) == ("waiting", TerminationReason.suspended(), [pending])


@pytest.mark.parametrize("target", ["c1", "perm_c1"])
async def test_a_live_decision_replays_the_call_through_the_gate_and_infers_again(target: str) -> None:
    runtime, guarded, log = guarded_runtime()
    gate = runtime.plugins[0]
    assert isinstance(gate, AskPermission)
    rec = Recorder()

    async with running(runtime, live(), rec) as results:
        await rec.wait_for(RunFinish)
        assert await runtime.send_decisions("t", [(target, APPROVE)])

    (result,) = results
    assert result.termination == TerminationReason.natural() and result.response == "done"
    assert len(guarded.calls) == 1 and guarded.contexts[0].resume_input == APPROVE
    assert gate.seen[-1].tool_call_id == "c1" and gate.seen[-1].resume_input == APPROVE
    resumed = rec.of(ToolCallResumed)
    assert [(e.target_id, e.result) for e in resumed] == [("c1", {"ok": True, "args": {"x": 1}})]
    assert_well_formed(rec.events)
    after = rec.types()[rec.types().index("run_finish") + 1 :]
    assert after[:3] == ["run_start", "tool_call_resumed", "step_start"]
    assert after[-1] == "run_finish" and rec.events[-1].termination == TerminationReason.natural()
    assert tool_messages(log.requests[1]) == {"c1": '{"ok": true, "args": {"x": 1}}'}
    assert (await stored_call_states(runtime, "t")) == {}  # the next step started afresh
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and record.display_status == "completed"


async def test_a_cancel_decision_reports_its_result_and_the_loop_continues() -> None:
    runtime, guarded, log = guarded_runtime()
    rec = Recorder()
    reject = ToolCallResume.reject("not now")

    async with running(runtime, live(), rec) as results:
        await rec.wait_for(RunFinish)
        await runtime.send_decisions("t", [("perm_c1", reject)])

    assert guarded.calls == []
    assert [(e.target_id, e.result, e.outcome) for e in rec.of(ToolCallResumed)] == [("c1", reject.result, "failed")]
    assert tool_messages(log.requests[1]) == {"c1": "The user rejected the call to 'guarded': not now"}
    assert results[0].termination == TerminationReason.natural()
    assert rec.types().index("tool_call_resumed") < rec.types().index("step_start", rec.types().index("run_finish"))


async def test_partial_decisions_keep_the_run_waiting_until_every_call_is_resolved() -> None:
    runtime, guarded, log = guarded_runtime(call("guarded", {"n": 1}, id="c1"), call("guarded", {"n": 2}, id="c2"))
    rec = Recorder()

    async with running(runtime, live(), rec) as results:
        await rec.wait_for(RunFinish)
        await runtime.send_decisions("t", [("c2", APPROVE)])
        await rec.wait_for(RunFinish, 2)
        assert [e.target_id for e in rec.of(ToolCallResumed)] == ["c2"]
        assert guarded.calls == [{"n": 2}] and len(log.requests) == 1
        await runtime.send_decisions("t", [("perm_c1", APPROVE)])

    finishes = rec.of(RunFinish)
    assert [is_suspended(f) for f in finishes] == [True, True, False]
    assert guarded.calls == [{"n": 2}, {"n": 1}]
    assert len(log.requests) == 2 and results[0].response == "done"


async def test_a_durable_partial_resume_leaves_the_run_waiting_for_the_rest() -> None:
    runtime, guarded, log = guarded_runtime(call("guarded", {"n": 1}, id="c1"), call("guarded", {"n": 2}, id="c2"))
    waiting = await runtime.run_to_completion(RunActivation(messages=[Message.user("go")], thread_id="t"))

    partial = await runtime.resume(waiting.run_id, [("perm_c2", APPROVE)])

    assert (partial.run_id, partial.status) == (waiting.run_id, "waiting")
    assert [t.ticket_id for t in partial.pending] == ["perm_c1"]
    record = await runtime.store.load_run(waiting.run_id)
    assert record is not None and record.waiting is not None and record.waiting.ticket_ids == ["perm_c1"]
    assert guarded.calls == [{"n": 2}] and len(log.requests) == 1

    result = await runtime.resume(waiting.run_id, [("perm_c1", APPROVE)])

    assert result.termination == TerminationReason.natural()
    assert guarded.calls == [{"n": 2}, {"n": 1}] and len(log.requests) == 2


async def test_decisions_sent_before_the_run_waits_are_not_lost() -> None:
    runtime, guarded, _ = guarded_runtime()

    async def decide_at_once(event: AgentEvent) -> None:
        if isinstance(event, ToolCallDone) and event.outcome == "suspended":  # the run has not reached its wait
            assert await runtime.send_decisions("t", [("c1", APPROVE)])

    rec = Recorder(decide_at_once)
    with anyio.fail_after(5):
        result = await runtime.run(live(), rec)

    assert result.termination == TerminationReason.natural()
    assert len(guarded.calls) == 1


async def test_a_live_decision_for_an_unknown_target_is_dropped_and_the_run_keeps_waiting() -> None:
    runtime, guarded, _ = guarded_runtime()
    rec = Recorder()

    async with running(runtime, live(), rec) as results:
        await rec.wait_for(RunFinish)
        await runtime.send_decisions("t", [("nope", APPROVE)])
        await anyio.wait_all_tasks_blocked()  # the run has taken the decision and waits again
        await runtime.send_decisions("t", [("c1", APPROVE)])

    assert len(guarded.calls) == 1 and results[0].termination == TerminationReason.natural()
    assert [is_suspended(f) for f in rec.of(RunFinish)] == [True, False]  # nothing new to report for "nope"


async def test_a_frontend_tool_suspends_and_returns_the_decision_result() -> None:
    log = RequestLog([turn("", call("pick_color", {"palette": "warm"}, id="c1")), turn("red it is")])
    runtime = make_runtime(log)
    color = ToolDescriptor(name="pick_color", description="Ask the user for a color.")
    rec = Recorder()

    async with running(runtime, live(frontend_tools=[color]), rec) as results:
        done = await rec.wait_for(ToolCallDone)
        ticket = done.result.suspension
        assert ticket is not None and done.outcome == "suspended"
        assert (ticket.suspension.id, ticket.suspension.action) == ("suspend_c1", "tool:pick_color")
        assert ticket.resume_mode == "use_decision_as_tool_result"
        await rec.wait_for(RunFinish)
        await runtime.send_decisions("t", [("suspend_c1", ToolCallResume(action="resume", result={"color": "red"}))])

    assert [t["name"] for t in log.requests[0].tools] == ["pick_color"]
    assert [(e.target_id, e.result) for e in rec.of(ToolCallResumed)] == [("c1", {"color": "red"})]
    assert tool_messages(log.requests[1]) == {"c1": '{"color": "red"}'}
    assert results[0].response == "red it is"


async def test_cancelling_a_waiting_run_ends_it_cancelled() -> None:
    runtime, guarded, _ = guarded_runtime()
    rec = Recorder()

    async with running(runtime, live(), rec) as results:
        await rec.wait_for(RunFinish)
        assert await runtime.cancel("t")

    (result,) = results
    assert result.termination == TerminationReason.cancelled() and result.status == "cancelled"
    finish = rec.events[-1]
    assert isinstance(finish, RunFinish) and finish.termination == TerminationReason.cancelled()
    assert guarded.calls == []
    assert (await stored_call_states(runtime, "t"))["c1"].status == "cancelled"
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and record.display_status == "cancelled" and record.waiting is None
    assert not await runtime.send_decisions("t", [("c1", APPROVE)])
    assert not runtime.is_running("t")


async def suspend_self(args: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    if ctx.resume_input is None:
        return ToolResult.suspended("ask_user")
    return ToolResult.success("ask_user", {"answer": ctx.resume_input.result})


Resume = Callable[[AgentRuntime, str, list[tuple[str, ToolCallResume]], Recorder], Awaitable[AgentRunResult]]


async def by_run_id(runtime: AgentRuntime, run_id: str, decisions: list[Any], rec: Recorder) -> AgentRunResult:
    return await runtime.resume(run_id, decisions, rec)


async def by_thread(runtime: AgentRuntime, run_id: str, decisions: list[Any], rec: Recorder) -> AgentRunResult:
    return await runtime.run(RunActivation(thread_id="t", decisions=decisions), rec)


@pytest.mark.parametrize("resume", [by_run_id, by_thread])
@pytest.mark.parametrize(
    ("tool_name", "target", "payload"),
    [("guarded", "perm_c1", {"ok": True, "args": {}}), ("ask_user", "c1", {"answer": "blue"})],
    ids=["gate-suspension", "tool-suspension"],
)
async def test_a_waiting_run_resumes_once_from_another_runtime_sharing_the_store(
    resume: Resume, tool_name: str, target: str, payload: Any
) -> None:
    turns = [turn("", call(tool_name, id="c1")), turn("resumed")]
    first_tool = FnTool(tool_name, suspend_self if tool_name == "ask_user" else None)
    first = make_runtime(turns, tools=[first_tool], plugins=[AskPermission("guarded")])
    waiting = await first.run_to_completion(RunActivation(messages=[Message.user("go")], thread_id="t"))
    assert waiting.status == "waiting" and [t.ticket_id for t in waiting.pending] == [target]

    # "another process": a fresh runtime over the same store, with its own tool instances
    tool = FnTool(tool_name, suspend_self if tool_name == "ask_user" else None)
    other = make_runtime(turns, tools=[tool], plugins=[AskPermission("guarded")], store=first.store)
    rec = Recorder()
    decision = ToolCallResume(action="resume", result="blue")
    result = await resume(other, waiting.run_id, [(target, decision)], rec)

    assert result.run_id == waiting.run_id
    assert (result.termination, result.response) == (TerminationReason.natural(), "resumed")
    assert len(tool.calls) == 1 and tool.contexts[0].resume_input == decision
    assert len(first_tool.calls) == (1 if tool_name == "ask_user" else 0)
    assert [(e.target_id, e.result) for e in rec.of(ToolCallResumed)] == [("c1", payload)]
    assert rec.types()[:2] == ["run_start", "tool_call_resumed"]
    record = await other.store.load_run(waiting.run_id)
    assert record is not None and record.display_status == "completed" and record.waiting is None
    with pytest.raises(InvalidResume, match="is not waiting"):
        await other.resume(waiting.run_id, [(target, decision)])
    assert len(tool.calls) == 1


async def test_an_unknown_decision_target_fails_the_resume_and_keeps_the_run_waiting() -> None:
    runtime, guarded, _ = guarded_runtime()
    waiting = await runtime.run_to_completion(RunActivation(messages=[Message.user("go")], thread_id="t"))

    with pytest.raises(DecisionTargetNotFound, match="tool call or suspension nope not found"):
        await runtime.resume(waiting.run_id, [("nope", APPROVE)])

    record = await runtime.store.load_run(waiting.run_id)
    assert record is not None and record.status == "waiting"
    result = await runtime.resume(waiting.run_id, [("perm_c1", APPROVE)])
    assert result.termination == TerminationReason.natural() and len(guarded.calls) == 1


async def test_a_resumed_run_emits_state_before_its_new_steps() -> None:
    runtime, _, _ = guarded_runtime()
    waiting = await runtime.run_to_completion(RunActivation(messages=[Message.user("go")], thread_id="t"))
    rec = Recorder()

    await runtime.resume(waiting.run_id, [("c1", APPROVE)], rec)

    assert rec.of(RunStart)[0].run_id == waiting.run_id
    assert len(rec.of(StepStart)) == 1 and len(rec.of(StateSnapshot)) == 2


async def test_decisions_with_a_new_message_put_the_replayed_result_before_the_message() -> None:
    runtime, guarded, _log = guarded_runtime(call("guarded", {"n": 1}, id="c1"))
    waiting = await runtime.run_to_completion(RunActivation(messages=[Message.user("go")], thread_id="t"))

    await runtime.run(RunActivation(messages=[Message.user("and then?")], thread_id="t", decisions=[("c1", APPROVE)]))

    loaded = await runtime.store.load_thread("t")
    assert loaded is not None and guarded.calls == [{"n": 1}]
    roles = [(m.role, m.tool_call_id or m.text) for m in loaded.messages]
    call_at = next(i for i, m in enumerate(loaded.messages) if m.tool_calls)
    assert roles[call_at + 1] == ("tool", "c1")
    assert roles[call_at + 2] == ("user", "and then?")
    assert waiting.run_id == loaded.latest_run.run_id if loaded.latest_run else False


async def test_a_durable_resume_runs_the_tool_in_the_run_s_working_directory(tmp_path: Any) -> None:
    seen: list[str | None] = []

    async def record_cwd(args: dict[str, Any], ctx: ToolCallContext) -> str:
        seen.append(ctx.env.cwd)
        return "ok"

    runtime = make_runtime([turn("", call("where", id="c1")), turn("done")], tools=[FnTool("where", record_cwd)])
    runtime.add_plugin(AskPermission())
    waiting = await runtime.run_to_completion(
        RunActivation(messages=[Message.user("go")], thread_id="t", env=RunEnvironment(cwd=str(tmp_path)))
    )

    other = AgentRuntime(store=runtime.store, agents=runtime.agents.values(), tools=runtime.tools.values())
    other.models, other.plugins = runtime.models, runtime.plugins
    await other.resume(waiting.run_id, [("c1", APPROVE)])

    assert seen == [str(tmp_path)]

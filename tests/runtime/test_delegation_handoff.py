"""Delegation (``agent_run_<id>`` tools running child agents) and handoff (switching agents within a run)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.events import ActivitySnapshot, RunStart, StepStart
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import ToolCallContext, ToolOutput, ToolResult
from awaken_stdio.runtime.handoff import HandoffPlugin, request_handoff
from awaken_stdio.runtime.plugins import MutationBatch
from tests.runtime.helpers import (
    THREAD_COUNTER,
    AskPermission,
    CounterPlugin,
    FnTool,
    Recorder,
    RequestLog,
    adder,
    call,
    done_by_id,
    make_runtime,
    tool_messages,
    turn,
)

pytestmark = pytest.mark.anyio

HELPER = AgentSpec(id="helper", model="helper-model", description="Answers questions about the weather.")


def delegating(prompt_args: dict[str, Any], helper_turns: list[dict[str, Any]], **kw: Any) -> tuple[Any, RequestLog]:
    log = RequestLog([turn("", call("agent_run_helper", prompt_args, id="d1")), turn("relayed")])
    runtime = make_runtime(log, delegates=["helper"], agents=[(HELPER, helper_turns)], **kw)
    return runtime, log


async def test_a_delegate_is_a_tool_that_runs_the_child_agent_and_returns_its_answer() -> None:
    runtime, log = delegating({"prompt": "weather in Oslo?"}, [turn("Rainy, 8 C.")])
    rec = Recorder()

    result = await runtime.run("ask the helper", rec)

    (tool,) = [t for t in log.requests[0].tools if t["name"] == "agent_run_helper"]
    assert tool["input_schema"]["required"] == ["prompt"]
    assert tool["description"] == HELPER.description
    done = done_by_id(rec)["d1"]
    assert done.outcome == "succeeded"
    assert done.result.data == {
        "agent_id": "helper",
        "status": "completed",
        "response": "Rainy, 8 C.",
        "output": "Rainy, 8 C.",
        "steps": 1,
    }
    child = await runtime.store.load_run(done.result.metadata["child_run_id"])
    assert child is not None and child.agent_id == "helper" and child.parent_run_id == result.run_id
    assert child.thread_id != result.thread_id and child.origin == "delegate"
    assert result.response == "relayed"
    assert "Rainy" in tool_messages(log.requests[1])["d1"]


async def test_a_delegation_reports_progress_on_the_parent_call() -> None:
    runtime, _ = delegating({"prompt": "weather?"}, [turn("Sunny.")])
    rec = Recorder()

    await runtime.run("go", rec)

    progress = [e for e in rec.of(ActivitySnapshot) if e.activity_type == "tool-call-progress"]
    assert {e.message_id for e in progress} == {"d1"}
    assert [e.content["status"] for e in progress] == ["running", "done"]
    assert progress[0].content["schema"] == "tool-call-progress.v1"
    assert progress[0].content["message"] == "delegating to helper"
    types = rec.types()
    assert types.index("activity_snapshot") < types.index("tool_call_done")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "Invalid arguments: prompt: a string is required"),
        ({"prompt": 42}, "Invalid arguments: prompt: a string is required"),
        ({"prompt": "  \n"}, "Invalid arguments: prompt must not be empty"),
    ],
)
async def test_a_delegation_without_a_prompt_fails_the_call_without_running_the_child(
    args: dict[str, Any], message: str
) -> None:
    runtime, _ = delegating(args, [turn("never")])
    rec = Recorder()

    result = await runtime.run("go", rec)

    done = done_by_id(rec)["d1"]
    assert (done.outcome, done.result.message) == ("failed", message)
    assert (await runtime.store.list_runs()).items == [await runtime.store.load_run(result.run_id)]
    assert result.response == "relayed"


async def test_a_failing_child_is_a_failed_call_and_the_parent_goes_on() -> None:
    runtime, _ = delegating({"prompt": "weather?"}, [turn(error={"kind": "unauthorized", "message": "no key"})])
    rec = Recorder()

    result = await runtime.run("go", rec)

    done = done_by_id(rec)["d1"]
    assert done.outcome == "failed" and "no key" in (done.result.message or "")
    progress = [e.content["status"] for e in rec.of(ActivitySnapshot)]
    assert progress == ["running", "failed"]
    assert result.termination == TerminationReason.natural()


async def test_a_waiting_child_suspends_the_parent_call_until_a_decision_answers_it() -> None:
    runtime, log = delegating({"prompt": "weather?"}, [turn("", call("guarded", id="g1"))], tools=[FnTool("guarded")])
    runtime.add_plugin(AskPermission("guarded"))
    rec = Recorder()

    waiting = await runtime.run(RunActivation(messages=[Message.user("go")], thread_id="t"), rec)

    done = done_by_id(rec)["d1"]
    assert done.outcome == "suspended" and done.result.suspension is not None
    child_run_id = done.result.metadata["child_run_id"]
    suspension = done.result.suspension.suspension
    assert (suspension.id, suspension.action) == (f"delegate_run:{child_run_id}", "agent_delegate:suspended")
    assert done.result.suspension.resume_mode == "use_decision_as_tool_result"
    assert suspension.parameters["status"] == "waiting"
    child = await runtime.store.load_run(child_run_id)
    assert child is not None and child.status == "waiting"
    assert waiting.status == "waiting"

    result = await runtime.resume(
        waiting.run_id, [(suspension.id, ToolCallResume(action="resume", result="sunny, said the user"))]
    )

    assert tool_messages(log.requests[1]) == {"d1": "sunny, said the user"}
    assert result.response == "relayed"


async def test_a_child_runs_with_isolated_state() -> None:
    # The parent adds 3 to a thread-scoped counter, then delegates; the child sees 0 and adds 5 on its own thread.
    parent_log = RequestLog(
        [turn("", call("add", {"n": 3}, id="a1")), turn("", call("agent_run_helper", {"prompt": "count"})), turn("ok")]
    )
    add = adder()
    runtime = make_runtime(
        parent_log,
        tools=[add],
        plugins=[CounterPlugin()],
        delegates=["helper"],
        agents=[(replace(HELPER, plugins=["test_counter"]), [turn("", call("add", {"n": 5})), turn("counted")])],
    )

    result = await runtime.run_to_completion(RunActivation(messages=[Message.user("go")], thread_id="parent"))

    assert [c.state(THREAD_COUNTER) for c in add.contexts] == [0, 0]
    parent_ctx, child_ctx = add.contexts
    assert parent_ctx.thread_id == "parent" != child_ctx.thread_id
    parent = await runtime.store.load_thread("parent")
    assert parent is not None and parent.state is not None
    assert parent.state.extensions[THREAD_COUNTER.key] == 3
    child = await runtime.store.load_thread(child_ctx.thread_id)
    assert child is not None and child.state is not None
    assert child.state.extensions[THREAD_COUNTER.key] == 5
    assert all(m.text != "count" for m in parent.messages)  # the child's conversation stays on its thread
    assert result.response == "ok"


EXPERT = AgentSpec(id="expert", model="expert-model")


def handing_over(target: str, expert: RequestLog) -> tuple[Any, RequestLog, FnTool]:
    """``default`` calls ``switch`` (which requests a handoff to ``target``), then would say "still default"."""

    async def switch(args: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        return ToolOutput(result=ToolResult.success("switch", "handing over"), command=request_handoff(target))

    log = RequestLog([turn("", call("switch", id="h1")), turn("still default"), turn("default again")])
    tool = FnTool("switch", switch)
    runtime = make_runtime(log, tools=[tool], plugins=[HandoffPlugin()], agents=[(EXPERT, expert)])
    return runtime, log, tool


async def test_handoff_switches_the_agent_at_the_next_step_within_the_same_run() -> None:
    expert = RequestLog([{}, turn("expert here"), turn("expert again")])
    runtime, log, _ = handing_over("expert", expert)
    rec = Recorder()

    result = await runtime.run(RunActivation(messages=[Message.user("help")], thread_id="t"), rec)

    assert (result.agent_id, result.response, result.steps) == ("expert", "expert here", 2)
    assert len(log.requests) == 1 and len(expert.requests) == 1
    assert tool_messages(expert.requests[0]) == {"h1": "handing over"}  # same history
    assert [e.run_id for e in rec.of(RunStart)] == [result.run_id]
    assert len(rec.of(StepStart)) == 2
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and record.agent_id == "expert"

    again = await runtime.run_to_completion(RunActivation(messages=[Message.user("more")], thread_id="t"))

    assert (again.agent_id, again.response) == ("expert", "expert again")
    assert len(log.requests) == 1


async def test_a_handoff_to_an_unknown_agent_blocks_the_run() -> None:
    runtime, log, _ = handing_over("ghost", RequestLog([]))
    rec = Recorder()

    result = await runtime.run("help", rec)

    assert result.termination == TerminationReason.blocked("handoff resolve failed: agent not found: ghost")
    assert len(log.requests) == 1
    assert rec.types()[-1] == "run_finish" and rec.types().count("step_start") == 1
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and record.display_status == "failed"
    assert record.status_reason == "blocked: handoff resolve failed: agent not found: ghost"


async def test_handoff_runs_the_plugins_activation_hooks() -> None:
    calls: list[str] = []

    class Tracker(HandoffPlugin):
        name = "tracker"

        def on_activate(self, agent: AgentSpec, batch: MutationBatch) -> None:
            calls.append(f"activate {agent.id}")

        def on_deactivate(self, batch: MutationBatch) -> None:
            calls.append("deactivate")

    runtime, _, _ = handing_over("expert", RequestLog([{}, turn("expert here")]))
    runtime.plugins = [Tracker()]

    await runtime.run_to_completion("help")

    assert calls == ["activate default", "deactivate", "activate expert"]


async def test_the_handoff_tool_validates_its_target() -> None:
    log = RequestLog([turn("", call("handoff", {"agent": "nobody"}, id="h1")), turn("stayed")])
    runtime = make_runtime(log, plugins=[HandoffPlugin(["expert"])], agents=[(EXPERT, [{}])])
    rec = Recorder()

    result = await runtime.run("go", rec)

    done = done_by_id(rec)["h1"]
    assert done.outcome == "failed" and done.result.message == "Invalid arguments: agent must be one of expert"
    assert (result.agent_id, result.response) == ("default", "stayed")

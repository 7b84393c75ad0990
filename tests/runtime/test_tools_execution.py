"""Tool calls: failures the model sees, executors (sequential / parallel), and the tool gate."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from awaken_stdio.contract.errors import ToolError, ToolFailure
from awaken_stdio.contract.events import RunFinish, RunResult, ToolCallDone
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.tools import ToolCallContext, ToolResult
from awaken_stdio.runtime.executors import INTERRUPTED
from awaken_stdio.runtime.plugins import Block, GateDecision, Phase, PhaseContext, Plugin, PluginRegistrar, SetResult
from awaken_stdio.runtime.plugins import Suspend as SuspendDecision
from tests.runtime.helpers import (
    COUNTER,
    AskPermission,
    CounterPlugin,
    FixedGate,
    FnTool,
    Recorder,
    RequestLog,
    adder,
    call,
    done_by_id,
    make_runtime,
    permission_ticket,
    tool_messages,
    turn,
)

pytestmark = pytest.mark.anyio


def raising(exc: BaseException, name: str = "flaky") -> FnTool:
    async def fail(args: dict[str, Any], ctx: ToolCallContext) -> Any:
        raise exc

    return FnTool(name, fail)


async def returning_error(args: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    return ToolResult.error("flaky", "disk full", code="io")


@pytest.mark.parametrize(
    ("tool", "text", "metadata"),
    [
        (raising(RuntimeError("boom")), "Execution failed: boom", {}),
        (raising(ToolFailure("no such row", "not_found")), "Not found: no such row", {}),
        (raising(ToolFailure("took 30 s", "timeout")), "Timeout: took 30 s", {"timed_out": True}),
        (raising(TimeoutError("too slow")), "Timeout: too slow", {"timed_out": True}),
        (FnTool("flaky", returning_error), "[io] disk full", {}),
        (FnTool("other"), "tool 'flaky' not found", {}),
    ],
    ids=["raise", "tool-failure", "timeout-kind", "timeout-builtin", "error-result", "unknown-tool"],
)
async def test_a_failing_call_becomes_a_failed_result_the_model_sees_and_the_run_goes_on(
    tool: FnTool, text: str, metadata: dict[str, Any]
) -> None:
    log = RequestLog([turn("", call("flaky", id="c1"), call("ok", id="c2")), turn("recovered")])
    ok = FnTool("ok")
    runtime = make_runtime(log, tools=[tool, ok])
    rec = Recorder()

    result = await runtime.run("go", rec)

    done = done_by_id(rec)
    assert done["c1"].outcome == "failed"
    assert done["c1"].result.is_error and done["c1"].result.text_for_model() == text
    assert done["c1"].result.metadata == metadata
    assert done["c2"].outcome == "succeeded" and len(ok.calls) == 1  # the batch goes on
    assert tool_messages(log.requests[1])["c1"] == text
    assert result.termination == TerminationReason.natural()
    assert result.response == "recovered"


@pytest.mark.parametrize("executor", ["sequential", "parallel"])
async def test_a_raised_tool_error_ends_the_run_failed_after_that_one_model_call(executor: str) -> None:
    # The docs: "for fatal errors that should stop the run, return a ToolError instead".
    log = RequestLog([turn("", call("fatal", id="c1"), call("ok", id="c2")), turn("never asked")])
    ok = FnTool("ok")
    runtime = make_runtime(log, tools=[raising(ToolError("the disk is on fire"), "fatal"), ok], tool_executor=executor)
    rec = Recorder()

    result = await runtime.run("go", rec)

    assert len(log.requests) == 1  # the model is not called again
    reason = "fatal: Execution failed: the disk is on fire"
    assert result.termination == TerminationReason.error(reason)
    assert (result.status, result.status_reason) == ("failed", reason)
    done = done_by_id(rec)
    assert done["c1"].outcome == "failed"
    if executor == "sequential":  # the calls after it do not run
        assert done["c2"].result.message == INTERRUPTED and ok.calls == []
    finish = rec.events[-1]
    assert isinstance(finish, RunFinish) and finish.result == RunResult(
        response="", status="failed", status_reason=reason
    )
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and (record.display_status, record.status_reason) == ("failed", reason)
    assert record.error == reason


async def test_a_tool_error_raised_while_checking_arguments_is_a_failed_call_the_model_can_fix() -> None:
    class Picky(FnTool):
        def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
            raise ToolError("n must be positive", "invalid_arguments")

    log = RequestLog([turn("", call("picky", id="c1")), turn("fixed")])
    runtime = make_runtime(log, tools=[Picky("picky")])

    result = await runtime.run("go")

    assert tool_messages(log.requests[1])["c1"] == "Invalid arguments: n must be positive"
    assert (result.status, result.response) == ("completed", "fixed")


async def test_invalid_arguments_fail_the_call_with_the_validation_message() -> None:
    class Strict(FnTool):
        def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
            if "path" not in args:
                raise ToolError("path is required", "invalid_arguments")
            return args

    strict = Strict("strict")
    log = RequestLog([turn("", call("strict", {"paht": "a"}, id="c1")), turn("ok")])
    runtime = make_runtime(log, tools=[strict])

    await runtime.run_to_completion("go")

    assert strict.calls == []
    assert tool_messages(log.requests[1]) == {"c1": "Invalid arguments: path is required"}


async def test_arguments_that_are_not_json_fail_the_call_without_running_the_tool() -> None:
    echo = FnTool("echo")
    log = RequestLog([{"tool_calls": [{"name": "echo", "id": "c1", "arguments_json": '{"path": '}]}, turn("ok")])
    runtime = make_runtime(log, tools=[echo])

    await runtime.run_to_completion("go")

    assert echo.calls == []
    assert tool_messages(log.requests[1]) == {"c1": 'Invalid arguments: not valid JSON: {"path":'}


async def test_the_model_reads_the_message_else_the_data_as_json() -> None:
    async def with_message(args: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        return ToolResult.success("said", {"n": 1}, "one thing")

    log = RequestLog([turn("", call("said", id="c1"), call("data", {"k": "v"}, id="c2")), turn("ok")])
    runtime = make_runtime(log, tools=[FnTool("said", with_message), FnTool("data")])

    await runtime.run_to_completion("go")

    assert tool_messages(log.requests[1]) == {"c1": "one thing", "c2": '{"ok": true, "args": {"k": "v"}}'}


@pytest.mark.parametrize(("executor", "seen"), [("sequential", [0, 3]), ("parallel", [0, 0])])
async def test_executors_state_visibility_and_commutative_merge(executor: str, seen: list[int]) -> None:
    add = adder()
    runtime = make_runtime(
        [turn("", call("add", {"n": 3}), call("add", {"n": 3})), turn("", call("add", {"n": 0})), turn("done")],
        tools=[add],
        plugins=[CounterPlugin()],
        tool_executor=executor,
    )

    await runtime.run_to_completion("go")

    # sequential refreshes the snapshot between calls; parallel runs both on one frozen snapshot;
    # either way both commands are committed (+3 +3 = 6 on the commutative key).
    assert [c.state(COUNTER) for c in add.contexts] == [*seen, 6]


async def test_parallel_runs_calls_concurrently_and_reports_them_in_call_order() -> None:
    second_started = anyio.Event()

    async def first(args: dict[str, Any], ctx: ToolCallContext) -> str:
        await second_started.wait()  # would deadlock if the calls ran one after the other
        return "first"

    async def second(args: dict[str, Any], ctx: ToolCallContext) -> str:
        second_started.set()
        return "second"

    runtime = make_runtime(
        [turn("", call("first", id="c1"), call("second", id="c2")), turn("done")],
        tools=[FnTool("first", first), FnTool("second", second)],
        tool_executor="parallel",
    )
    rec = Recorder()

    with anyio.fail_after(5):
        await runtime.run("go", rec)

    assert [e.id for e in rec.of(ToolCallDone)] == ["c1", "c2"]


async def suspend_self(args: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    if ctx.resume_input is not None:
        return ToolResult.success("ask_user", ctx.resume_input.result)
    return ToolResult.suspended("ask_user")


@pytest.mark.parametrize(
    ("executor", "later"), [("sequential", ("failed", INTERRUPTED, 0)), ("parallel", ("succeeded", None, 1))]
)
async def test_a_tool_returned_suspension_stops_only_the_sequential_executor(
    executor: str, later: tuple[str, str | None, int]
) -> None:
    ask, echo = FnTool("ask_user", suspend_self), FnTool("echo")
    runtime = make_runtime(
        [turn("", call("ask_user", id="c1"), call("echo", id="c2"), call("echo", id="c3"))],
        tools=[ask, echo],
        tool_executor=executor,
    )
    rec = Recorder()

    result = await runtime.run("go", rec)

    done = done_by_id(rec)
    outcome, text, executions = later
    assert done["c1"].outcome == "suspended"
    for call_id in ("c2", "c3"):
        assert done[call_id].outcome == outcome
        assert done[call_id].result.message == text
    assert len(echo.calls) == 2 * executions
    assert result.termination == TerminationReason.suspended()
    assert [t.tool_call_id for t in result.pending] == ["c1"]


async def test_a_gate_suspension_does_not_stop_later_calls() -> None:
    guarded, echo = FnTool("guarded"), FnTool("echo")
    runtime = make_runtime(
        [turn("", call("guarded", id="c1"), call("echo", id="c2"))],
        tools=[guarded, echo],
        plugins=[AskPermission("guarded")],
    )
    rec = Recorder()

    result = await runtime.run("go", rec)

    assert done_by_id(rec)["c1"].outcome == "suspended"
    assert done_by_id(rec)["c2"].outcome == "succeeded"
    assert (guarded.calls, len(echo.calls)) == ([], 1)
    assert result.status == "waiting"


def decisions(tool: str) -> dict[str, GateDecision]:
    return {
        "block": Block(reason="not allowed"),
        "suspend": SuspendDecision(ticket=permission_ticket("c1", tool, {})),
        "set": SetResult(result=ToolResult.success(tool, "canned")),
    }


@pytest.mark.parametrize(
    ("kinds", "winner"),
    [
        (["set", "suspend", "block"], "block"),
        (["block", "set", "suspend"], "block"),
        (["set", "suspend"], "suspend"),
        (["suspend", "set"], "suspend"),
        (["set"], "set"),
    ],
)
async def test_gate_precedence_is_block_then_suspend_then_set_result(kinds: list[str], winner: str) -> None:
    target = FnTool("target")
    runtime = make_runtime(
        [turn("", call("target", id="c1")), turn("done")],
        tools=[target],
        plugins=[FixedGate(f"gate_{kind}", "target", decisions("target")[kind]) for kind in kinds],
    )
    rec = Recorder()

    result = await runtime.run("go", rec)

    done = done_by_id(rec)["c1"]
    assert target.calls == []
    outcome = {"block": "failed", "suspend": "suspended", "set": "succeeded"}[winner]
    assert done.outcome == outcome
    if winner == "block":
        assert result.termination == TerminationReason.blocked("not allowed")
    elif winner == "suspend":
        assert done.result.suspension is not None and done.result.suspension.suspension.id == "perm_c1"
        assert result.termination == TerminationReason.suspended()
    else:
        assert done.result.data == "canned"
        assert result.response == "done"


async def test_set_result_still_runs_after_tool_execute_hooks() -> None:
    seen: list[tuple[str | None, Any]] = []

    class Observer(Plugin):
        name = "observer"

        def register(self, registrar: PluginRegistrar) -> None:
            registrar.phase_hook(Phase.AFTER_TOOL_EXECUTE, self.after)

        async def after(self, ctx: PhaseContext) -> None:
            assert ctx.tool_result is not None
            seen.append((ctx.tool_call_id, ctx.tool_result.data))

    runtime = make_runtime(
        [turn("", call("target", id="c1")), turn("done")],
        tools=[FnTool("target")],
        plugins=[FixedGate("gate", "target", SetResult(result=ToolResult.success("target", "canned"))), Observer()],
    )

    await runtime.run_to_completion("go")

    assert seen == [("c1", "canned")]


async def test_block_fails_the_call_interrupts_the_rest_and_ends_the_run_blocked() -> None:
    echo, danger = FnTool("echo"), FnTool("danger")
    runtime = make_runtime(
        [turn("", call("echo", id="c1"), call("danger", id="c2"), call("echo", id="c3")), turn("never")],
        tools=[echo, danger],
        plugins=[FixedGate("gate", "danger", Block(reason="danger is off limits"))],
    )
    rec = Recorder()

    result = await runtime.run("go", rec)

    done = done_by_id(rec)
    assert done["c1"].outcome == "succeeded"  # allowed calls before the block still run
    assert done["c2"].outcome == "failed"
    assert done["c2"].result.message == "danger is off limits"
    assert done["c2"].result.metadata == {"rejected": True}
    assert done["c3"].outcome == "failed" and done["c3"].result.message == INTERRUPTED
    assert (len(echo.calls), danger.calls) == (1, [])
    assert result.termination == TerminationReason.blocked("danger is off limits")
    finish = rec.events[-1]
    assert finish.event_type == "run_finish"
    assert finish.result is not None and finish.result.status_reason == "blocked: danger is off limits"
    assert rec.types().count("inference_complete") == 1


async def test_an_intercepted_call_is_regated_after_the_allowed_calls_before_it_ran() -> None:
    class UntilCounted(Plugin):
        """Suspends ``target`` while the counter is still 0."""

        name = "until_counted"

        def register(self, registrar: PluginRegistrar) -> None:
            registrar.tool_gate(self.gate)

        async def gate(self, ctx: PhaseContext) -> GateDecision | None:
            if ctx.tool_name == "target" and ctx.state(COUNTER) == 0:
                return SuspendDecision(ticket=permission_ticket(ctx.tool_call_id or "", "target", {}))
            return None

    target = FnTool("target")
    runtime = make_runtime(
        [turn("", call("add", {"n": 1}, id="c1"), call("target", id="c2")), turn("done")],
        tools=[adder(), target],
        plugins=[CounterPlugin(), UntilCounted()],
    )

    result = await runtime.run_to_completion("go")

    assert len(target.calls) == 1
    assert result.termination == TerminationReason.natural()

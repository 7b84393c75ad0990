"""The agent loop: event order, run results, stop policies, inference failures, one run per thread, scopes."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.errors import ProviderError, ThreadAlreadyRunning
from awaken_stdio.contract.events import ErrorEvent, RunFinish, RunResult, StepStart, ToolCallDone
from awaken_stdio.contract.inference import InferenceRequest
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message
from awaken_stdio.runtime.plugins import Phase, PhaseContext, Plugin, PluginRegistrar
from awaken_stdio.runtime.run.loop import SUPERSEDED
from awaken_stdio.runtime.runtime_keys import TOOL_CALL_STATES
from tests.runtime.helpers import (
    COUNTER,
    THREAD_COUNTER,
    AskPermission,
    CounterPlugin,
    FnTool,
    Recorder,
    RequestLog,
    adder,
    assert_well_formed,
    call,
    make_runtime,
    tool_messages,
    turn,
)

pytestmark = pytest.mark.anyio


async def test_text_only_run_emits_the_reference_event_order() -> None:
    runtime = make_runtime([turn("Hello there", chunk_chars=5)])
    rec = Recorder()

    result = await runtime.run("hi", rec)

    assert rec.types() == [
        "run_start",
        "step_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "inference_complete",
        "state_snapshot",
        "step_end",
        "state_snapshot",
        "run_finish",
    ]
    assert "".join(e.delta for e in rec.events if e.event_type == "text_delta") == "Hello there"
    assert result.termination == TerminationReason.natural()
    assert result.steps == 1


async def test_tool_run_events_are_ordered_and_steps_paired() -> None:
    runtime = make_runtime(
        [turn("first", call("echo", {"x": 1}), call("echo", {"x": 2})), turn("", call("echo")), turn("done")],
        tools=[FnTool("echo")],
    )
    rec = Recorder()

    result = await runtime.run("go", rec)

    assert_well_formed(rec.events)
    assert rec.types().count("run_start") == 1
    assert rec.types().count("step_start") == 3
    first_step = rec.types()[: rec.types().index("step_end") + 1]
    assert first_step == [
        "run_start",
        "step_start",
        "text_delta",
        "tool_call_start",
        "tool_call_delta",
        "tool_call_start",
        "tool_call_delta",
        "tool_call_ready",
        "tool_call_ready",
        "inference_complete",
        "tool_call_done",
        "tool_call_done",
        "state_snapshot",
        "step_end",
    ]
    assert [e.step for e in rec.of(StepStart)] == [1, 2, 3]
    assert result.steps == 3


async def test_run_finish_result_carries_the_last_assistant_text_of_the_run() -> None:
    # The last turn says nothing: the response is the last text produced in this run, not the previous run's.
    runtime = make_runtime(
        [turn("earlier run"), turn("looking", call("echo")), turn("")],
        tools=[FnTool("echo")],
    )
    first = await runtime.run_to_completion(RunActivation(messages=[Message.user("one")], thread_id="t"))
    rec = Recorder()

    result = await runtime.run(RunActivation(messages=[Message.user("two")], thread_id="t"), rec)

    assert first.response == "earlier run"
    finish = rec.events[-1]
    assert isinstance(finish, RunFinish)
    assert finish.result == RunResult(response="looking", status="completed", status_reason="natural")
    assert finish.result.to_json() == {"response": "looking", "status": "completed", "status_reason": "natural"}
    assert result.response == "looking"
    stored = await runtime.store.load_run(result.run_id)
    assert stored is not None and stored.response == "looking" and stored.display_status == "completed"


@pytest.mark.parametrize(("max_rounds", "executed"), [(1, 0), (3, 2)])
async def test_max_rounds_stops_after_the_nth_inference_before_its_tools(max_rounds: int, executed: int) -> None:
    echo = FnTool("echo")
    runtime = make_runtime([turn(f"round {i}", call("echo")) for i in range(10)], tools=[echo], max_rounds=max_rounds)
    rec = Recorder()

    result = await runtime.run("loop", rec)

    assert len(echo.calls) == executed
    assert len(rec.of(ToolCallDone)) == executed
    assert result.termination == TerminationReason.stopped("max_rounds", f"reached {max_rounds} rounds")
    assert result.steps == max_rounds  # the stopping step is completed (lifecycle step_count, as in awaken)
    assert rec.types().count("inference_complete") == max_rounds
    assert result.response == f"round {max_rounds - 1}"
    finish = rec.events[-1]
    assert isinstance(finish, RunFinish) and finish.result is not None
    assert finish.result.status_reason == "stopped: max_rounds"
    assert_well_formed(rec.events)


@pytest.mark.parametrize(
    ("spec", "code"),
    [({"max_tokens": 1}, "token_budget"), ({"timeout_s": 0.0}, "timeout")],
)
async def test_budget_stop_policies_end_the_run_stopped(spec: dict[str, Any], code: str) -> None:
    echo = FnTool("echo")
    runtime = make_runtime([turn("a", call("echo")), turn("b", call("echo")), turn("c")], tools=[echo], **spec)

    result = await runtime.run_to_completion("go")

    assert result.termination.type == "stopped"
    assert result.termination.value["code"] == code
    assert echo.calls == []


async def test_inference_error_emits_error_without_run_finish_and_records_the_run_failed() -> None:
    runtime = make_runtime([turn(error={"kind": "unauthorized", "message": "bad key"})])
    rec = Recorder()

    with pytest.raises(ProviderError, match="bad key"):
        await runtime.run(RunActivation(messages=[Message.user("hi")], thread_id="t"), rec)

    assert rec.types()[0] == "run_start"
    assert rec.types()[-1] == "error"
    assert "run_finish" not in rec.types()
    error = rec.of(ErrorEvent)[0]
    assert (error.message, error.code) == ("bad key", "unauthorized")
    run = await runtime.store.latest_run("t")
    assert run is not None
    assert run.status == "done" and run.display_status == "failed" and run.error == "bad key"
    assert not runtime.is_running("t")


async def test_a_second_run_on_an_active_thread_is_refused() -> None:
    release = anyio.Event()

    async def slow(request: InferenceRequest, index: int) -> dict[str, Any]:
        if request.messages[-1].text == "one":
            await release.wait()
        return turn("finally")

    runtime = make_runtime(slow)
    rec = Recorder()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run, RunActivation(messages=[Message.user("one")], thread_id="t"), rec)
            await rec.wait_for(StepStart)

            with pytest.raises(ThreadAlreadyRunning, match="thread already has an active run"):
                await runtime.run(RunActivation(messages=[Message.user("two")], thread_id="t"))
            other = await runtime.run_to_completion(RunActivation(messages=[Message.user("elsewhere")], thread_id="u"))
            release.set()

    assert other.response == "finally"
    assert rec.types()[-1] == "run_finish"
    assert not runtime.is_running("t")


async def test_a_new_user_message_supersedes_suspended_calls() -> None:
    log = RequestLog([turn("", call("guarded", id="c1")), turn("fresh start")])
    guarded = FnTool("guarded")
    runtime = make_runtime(log, tools=[guarded], plugins=[AskPermission("guarded")])
    waiting = await runtime.run_to_completion(RunActivation(messages=[Message.user("do it")], thread_id="t"))
    assert waiting.status == "waiting"

    result = await runtime.run_to_completion(RunActivation(messages=[Message.user("never mind")], thread_id="t"))

    assert result.termination == TerminationReason.natural()
    assert result.run_id != waiting.run_id
    assert guarded.calls == []
    assert tool_messages(log.requests[-1]) == {"c1": SUPERSEDED}
    old = await runtime.store.load_run(waiting.run_id)
    assert old is not None and old.status == "done" and old.waiting is None
    assert old.display_status == "cancelled" and old.status_reason == "superseded"
    loaded = await runtime.store.load_thread("t")
    assert loaded is not None and loaded.state is not None
    states = TOOL_CALL_STATES.decode(loaded.state.extensions.get(TOOL_CALL_STATES.key, {}))
    assert all(s.status != "suspended" for s in states.values())


async def test_thread_state_persists_across_runs_and_run_state_starts_at_default() -> None:
    add = adder()
    runtime = make_runtime(
        lambda request, i: turn("", call("add", {"n": 2})) if i % 2 == 0 else turn("ok"),
        tools=[add],
        plugins=[CounterPlugin()],
    )

    for text in ("one", "two"):
        await runtime.run_to_completion(RunActivation(messages=[Message.user(text)], thread_id="t"))

    run_seen = [c.state(COUNTER) for c in add.contexts]
    thread_seen = [c.state(THREAD_COUNTER) for c in add.contexts]
    assert run_seen == [0, 0]  # run-scoped: default at every run
    assert thread_seen == [0, 2]  # thread-scoped: restored from the previous run
    loaded = await runtime.store.load_thread("t")
    assert loaded is not None and loaded.state is not None
    assert loaded.state.extensions[THREAD_COUNTER.key] == 4
    assert COUNTER.key not in loaded.state.extensions


class _PhaseCounter(Plugin):
    """Counts how often each phase's hook runs."""

    name = "phase_counter"

    def __init__(self) -> None:
        self.calls: dict[Phase, int] = {}

    def register(self, registrar: PluginRegistrar) -> None:
        for phase in Phase:
            if phase is Phase.TOOL_GATE:
                continue

            async def hook(ctx: PhaseContext, phase: Phase = phase) -> None:
                self.calls[phase] = self.calls.get(phase, 0) + 1

            registrar.phase_hook(phase, hook)


async def test_every_phase_hook_runs_once_per_occasion() -> None:
    counter = _PhaseCounter()
    runtime = make_runtime([turn("", call("echo", {"n": 1})), turn("done")], tools=[FnTool("echo")], plugins=[counter])

    await runtime.run_to_completion("go")

    per_step = (Phase.STEP_START, Phase.BEFORE_INFERENCE, Phase.AFTER_INFERENCE, Phase.STEP_END)
    assert {p: counter.calls.get(p) for p in per_step} == dict.fromkeys(per_step, 2)
    per_call = (Phase.BEFORE_TOOL_EXECUTE, Phase.AFTER_TOOL_EXECUTE)
    assert {p: counter.calls.get(p) for p in per_call} == dict.fromkeys(per_call, 1)
    assert counter.calls[Phase.RUN_START] == counter.calls[Phase.RUN_END] == 1

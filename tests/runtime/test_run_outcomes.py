"""How runs end: stopped and blocked runs are failed with their reason, and whatever ends a run releases its thread.

The docs' in-process backend maps ``Stopped(reason)`` to ``Failed("stopped: ...")`` and ``Blocked(message)`` to
``Failed("blocked: ...")``. A store error, a provider error, a crashing hook or text that is not valid Unicode ends
the run recorded as failed, and the next run of the thread works (issue 13.2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.errors import StoreError
from awaken_stdio.contract.events import AgentEvent, ErrorEvent, RunFinish, TextDelta
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.state import StateCommand
from awaken_stdio.contract.stores import Checkpoint, Store
from awaken_stdio.contract.tools import ToolCallContext
from awaken_stdio.runtime.plugins import Block, Phase, PhaseContext, Plugin, PluginRegistrar
from awaken_stdio.stores import open_store
from tests.runtime.helpers import FixedGate, FnTool, Recorder, call, done_by_id, make_runtime, turn

pytestmark = pytest.mark.anyio


async def test_a_max_rounds_stop_is_a_failed_run_whose_reason_keeps_the_code() -> None:
    runtime = make_runtime([turn("again", call("echo")) for _ in range(5)], tools=[FnTool("echo")], max_rounds=2)

    result = await runtime.run("loop")

    assert (result.status, result.status_reason) == ("failed", "stopped: max_rounds")
    assert result.termination.type == "stopped" and result.termination.value["code"] == "max_rounds"  # for ACP
    record = await runtime.store.load_run(result.run_id)
    assert record is not None and (record.display_status, record.status_reason) == ("failed", "stopped: max_rounds")


async def test_a_blocked_delegate_is_an_error_result_for_its_parent() -> None:
    child = AgentSpec(id="child", model="child-model", plugins=["no_danger"])
    parent_turns = [turn("", call("agent_run_child", {"prompt": "do it"}, id="d1")), turn("the child could not")]
    runtime = make_runtime(
        parent_turns,
        plugins=[FixedGate("no_danger", "danger", Block(reason="danger is off limits"))],
        tools=[FnTool("danger")],
        delegates=["child"],
        agents=[(child, [turn("", call("danger"))])],
    )
    rec = Recorder()

    result = await runtime.run("go", rec)

    done = done_by_id(rec)["d1"]
    assert done.outcome == "failed"
    assert done.result.message == "agent 'child' ended failed: blocked: danger is off limits"
    assert done.result.data["status_reason"] == "blocked: danger is off limits"
    assert (result.status, result.response) == ("completed", "the child could not")


# -- whatever ends a run releases its thread ---------------------------------------------------------------------


class FlakyStore:
    """A real store whose next ``checkpoint`` fails once, as on a full disk."""

    def __init__(self, store: Store, error: Exception) -> None:
        self._store = store
        self.error: Exception | None = error

    async def checkpoint(self, cp: Checkpoint) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        await self._store.checkpoint(cp)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.mark.parametrize(
    "error", [StoreError("database or disk is full"), OSError(28, "No space left on device")], ids=["store", "os"]
)
async def test_a_store_failure_records_the_run_failed_and_the_next_run_of_the_thread_works(
    tmp_path: Path, error: Exception
) -> None:
    async with open_store(f"sqlite://{tmp_path}/awaken.db") as sqlite:
        store = FlakyStore(sqlite, error)
        runtime = make_runtime([turn("first"), turn("second")], store=store)  # type: ignore[arg-type]
        rec = Recorder()

        with pytest.raises(type(error)):
            await runtime.run(RunActivation(messages=[Message.user("one")], thread_id="t"), rec)

        assert not runtime.is_running("t")
        errors = rec.of(ErrorEvent)
        assert [e.message for e in errors] == [str(error)]
        loaded = await sqlite.load_thread("t")
        assert loaded is not None and loaded.latest_run is not None
        assert loaded.latest_run.display_status == "failed" and loaded.latest_run.status == "done"
        assert loaded.latest_run.status_reason == str(error)

        again = await runtime.run(RunActivation(messages=[Message.user("two")], thread_id="t"))

        assert (again.status, again.response) == ("completed", "second")


async def test_a_crashing_hook_fails_the_run_and_the_next_run_of_the_thread_works() -> None:
    class Crash(Plugin):
        name = "crash"

        def __init__(self) -> None:
            self.armed = True

        def register(self, registrar: PluginRegistrar) -> None:
            async def step_end(ctx: PhaseContext) -> StateCommand | None:
                if self.armed:
                    self.armed = False
                    raise RuntimeError("hook crashed")
                return None

            registrar.phase_hook(Phase.STEP_END, step_end)

    runtime = make_runtime([turn("first"), turn("second")], plugins=[Crash()])

    with pytest.raises(RuntimeError, match="hook crashed"):
        await runtime.run(RunActivation(messages=[Message.user("one")], thread_id="t"))

    record = await runtime.store.latest_run("t")
    assert record is not None and (record.display_status, record.status_reason) == ("failed", "hook crashed")
    assert (await runtime.run(RunActivation(messages=[Message.user("two")], thread_id="t"))).response == "second"


async def test_text_that_is_not_valid_unicode_is_repaired_before_it_is_stored_or_sent(tmp_path: Path) -> None:
    # A lone UTF-16 surrogate (a model's "\ud800" escape) cannot be encoded as UTF-8: a client write would fail.
    async def echo(args: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
        return {"name": "bad\udc80name", "items": ["ok", "\ud800"]}

    turns = [turn("broken \ud800 text", call("echo", {"path": "a\udfffb"}, id="c1")), turn("fine"), turn("again")]
    sent: list[bytes] = []

    async def sink(event: AgentEvent) -> None:  # as a protocol server writes events: strict UTF-8 JSON
        sent.append(json.dumps(event.to_json(), ensure_ascii=False).encode("utf-8"))

    async with open_store(f"sqlite://{tmp_path}/awaken.db") as store:
        runtime = make_runtime(turns, tools=[FnTool("echo", echo)], store=store)
        result = await runtime.run(RunActivation(messages=[Message.user("go")], thread_id="t"), sink)

        assert result.status == "completed"
        loaded = await store.load_thread("t")
        assert loaded is not None
        assistant = loaded.messages[1]
        assert assistant.text == "broken \ufffd text"
        assert assistant.tool_calls[0].arguments == {"path": "a\ufffdb"}
        assert json.loads(loaded.messages[2].text) == {"name": "bad\ufffdname", "items": ["ok", "\ufffd"]}
        texts = [json.loads(b)["delta"] for b in sent if json.loads(b)["event_type"] == TextDelta.event_type]
        assert "".join(texts) == "broken \ufffd textfine"
        assert json.loads(sent[-1])["event_type"] == RunFinish.event_type

        again = await runtime.run(RunActivation(messages=[Message.user("more")], thread_id="t"))
        assert again.status == "completed"

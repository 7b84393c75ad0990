"""The runtime's half of "unknown, you decide": a call whose earlier attempt's outcome is unknown is never run by an
approval that does not say to run it again, is recorded as done without running when the person says so, and is
not swept away by the next prompt (the person is asked about it first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.mailbox import EffectRecord
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.runtime.run.suspension import RECORDED_DONE
from awaken_stdio.stores import open_store
from tests.runtime.helpers import FnTool, make_runtime, turn

pytestmark = pytest.mark.anyio


async def test_a_new_prompt_asks_about_an_unknown_call_and_only_an_explicit_choice_settles_it(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        # a process died running c9 (an allowed write): its start is in the ledger, its end never reached the store
        await store.mailbox.effect_started(
            EffectRecord(
                thread_id="t1", call_id="c9", run_id="r-dead", tool_name="write", arguments={"line": "x"}, started_at=1
            )
        )
        write = FnTool("write")
        script = [turn("(the dead attempt)"), turn("Answered after the write was settled.")]
        runtime = make_runtime(script, tools=[write], store=store)

        asked = await runtime.run(RunActivation(messages=[Message.user("something new")], thread_id="t1"))
        assert asked.status == "waiting" and [(p.tool_call_id, p.outcome_unknown) for p in asked.pending] == [
            ("c9", True)
        ]  # asked first, not superseded by the new message

        blind = await runtime.resume(asked.run_id, [("c9", ToolCallResume.approve())])
        assert blind.status == "waiting" and write.calls == []  # a plain approval does not run it again

        done = await runtime.resume(asked.run_id, [("c9", ToolCallResume.approve(unknown="done"))])
        assert done.status == "completed" and write.calls == []  # recorded as done, never run
        loaded = await store.load_thread("t1")
        assert loaded is not None
        answers = [m.text for m in loaded.messages if m.role == "tool" and m.tool_call_id == "c9"]
        assert answers == [RECORDED_DONE]
        assert "something new" in [m.text for m in loaded.messages if m.role == "user"]
        assert await store.mailbox.open_effects("t1") == []  # settled with the answer


async def test_the_person_may_run_an_unknown_call_again(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        await store.mailbox.effect_started(
            EffectRecord(
                thread_id="t1", call_id="c9", run_id="r-dead", tool_name="write", arguments={"line": "x"}, started_at=1
            )
        )
        write = FnTool("write")
        runtime = make_runtime([turn("(the dead attempt)"), turn("Done again.")], tools=[write], store=store)
        asked = await runtime.run(RunActivation(messages=[], thread_id="t1"))
        again = await runtime.resume(asked.run_id, [("c9", ToolCallResume.approve(unknown="rerun"))])
        assert again.status == "completed" and write.calls == [{"line": "x"}]

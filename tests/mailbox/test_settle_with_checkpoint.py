"""A dispatch is settled by the checkpoint that ends its run or makes it wait (issue 16: one write, not two): the
run's result recorded on the row and the row acked in the run's own transaction, on every store that can; the
dispatcher settles the row itself where the run's checkpoint did not (its claim moved meanwhile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken_stdio.app.dispatch import MailboxConfig, MailboxService
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.mailbox import DispatchSettle
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint
from awaken_stdio.runtime.plugins import Block
from awaken_stdio.stores import open_store
from tests.mailbox.test_service import APPROVE, guarded
from tests.runtime.helpers import AskPermission, FixedGate, FnTool, call, make_runtime, turn
from tests.runtime.test_effect_marks import begins

pytestmark = pytest.mark.anyio


async def test_a_submitted_run_and_its_decision_settle_their_dispatches_with_their_checkpoints(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime, tool = guarded(store)
        service = MailboxService(runtime=runtime, config=MailboxConfig(dispatch_queued=False))
        seen = await begins(store)
        waiting = await service.submit(RunActivation(messages=[Message.user("go")], thread_id="t1"))
        assert waiting.status == "waiting"
        assert len(seen) == 2  # the dispatch claimed; the run's checkpoint, waiting, with the row acked
        (asked,) = await store.mailbox.list_dispatches("t1", ["acked"])
        assert asked.run_status == "waiting" and asked.termination is not None
        assert asked.termination.type == "suspended"

        seen.clear()
        done = await service.decide(waiting.run_id, APPROVE)
        assert done is not None and done.status == "completed" and len(tool.calls) == 1
        assert len(seen) == 3  # the decision claimed; the tool's effect mark; the run's end with the row acked
        rows = {r.request.kind: r for r in await store.mailbox.list_dispatches("t1", ["acked"])}
        assert rows["decide"].run_status == "done" and rows["decide"].run_response == "done"


async def test_a_run_waiting_for_its_holder_keeps_its_dispatch_claimed(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime, _ = guarded(store)
        service = MailboxService(runtime=runtime, config=MailboxConfig(dispatch_queued=False))
        held = []

        async def on_waiting() -> None:
            (row,) = await store.mailbox.list_dispatches("t1", ["claimed"])
            held.append(row.run_status)
            await service.decide(row.run_id, APPROVE)

        activation = RunActivation(messages=[Message.user("go")], thread_id="t1", wait_for_decisions=True)
        done = await service.submit(activation, on_waiting=on_waiting)
        assert done.status == "completed" and held == ["waiting"]  # recorded waiting, still its holder's
        rows = {r.request.kind: r.run_status for r in await store.mailbox.list_dispatches("t1", ["acked"])}
        assert rows == {"run": "waiting", "decide": "done"}  # the holder took the decision over, then finished


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_a_moved_claim_is_not_settled_by_the_checkpoint(tmp_path: Path, url: str) -> None:
    """The checkpoint is written whatever became of the claim; only the row's settling is left undone."""
    async with open_store(f"sqlite://{tmp_path}/a.db" if url == "sqlite" else url) as store:
        runtime, _ = guarded(store)
        service = MailboxService(runtime=runtime, config=MailboxConfig(dispatch_queued=False))
        waiting = await service.submit(RunActivation(messages=[Message.user("go")], thread_id="t1"))
        (row,) = await store.mailbox.list_dispatches("t1", ["acked"])
        record = await store.load_run(waiting.run_id)
        assert record is not None
        settle = DispatchSettle(dispatch_id=row.dispatch_id, claim_token="a claim token nobody holds")
        loaded = await store.load_thread("t1")
        assert loaded is not None
        await store.checkpoint(
            Checkpoint(
                thread_id="t1",
                expected_message_count=loaded.thread.message_count,
                messages=[],
                run=record,
                thread_state=None,
                settle=settle,
            )
        )
        assert not settle.settled and not settle.acked
        (still,) = await store.mailbox.list_dispatches("t1", ["acked"])
        assert still.updated_at == row.updated_at and still.updated_at <= now_ms()


async def test_a_step_that_asks_and_is_blocked_settles_its_dispatch_with_the_runs_end(tmp_path: Path) -> None:
    """One call waits for approval, the next is blocked: the run ends blocked, and its row says so (it is not
    settled early by the asking call's checkpoint, before the run's end is known)."""
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        turns = [turn("", call("guarded", id="c1"), call("target", id="c2")), turn("never")]
        gates = [AskPermission("guarded"), FixedGate("refuse", "target", Block(reason="not here"))]
        runtime = make_runtime(turns, tools=[FnTool("guarded"), FnTool("target")], plugins=gates, store=store)
        service = MailboxService(runtime=runtime, config=MailboxConfig(dispatch_queued=False))
        result = await service.submit(RunActivation(messages=[Message.user("go")], thread_id="t1"))
        assert result.status != "waiting" and result.termination.type == "blocked"
        (row,) = await store.mailbox.list_dispatches("t1", ["acked"])
        assert row.run_status == "done" and row.termination == result.termination

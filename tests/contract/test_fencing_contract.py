"""Fencing on every backend: a holder whose claim moved on (its lease lapsed and another process took the run)
can neither write the run nor start an effect. Each write checks the claim in its own transaction."""

from __future__ import annotations

import pytest

from awaken_stdio.contract.errors import Fenced
from awaken_stdio.contract.mailbox import EffectRecord, Fence, RunDispatch
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, RunRecord, Store

pytestmark = pytest.mark.anyio

LEASE = 6_000


async def taken_over(store: Store) -> tuple[Fence, Fence]:
    """The first holder's fence, and the fence of the process that took the thread over once its lease lapsed."""
    mb = store.mailbox
    first = await mb.enqueue_and_claim(
        RunDispatch(dispatch_id="d1", thread_id="t1", run_id="r1", created_at=1, updated_at=1), "old", LEASE, 1000
    )
    assert first is not None and first.claim_token
    assert [d.dispatch_id for d in await mb.reclaim_expired_leases(1000 + LEASE + 1)] == ["d1"]
    (second,) = await mb.claim("t1", "new", LEASE, 1000 + LEASE + 2)
    assert second.claim_token and second.claim_token != first.claim_token
    return (
        Fence(dispatch_id="d1", claim_token=first.claim_token),
        Fence(dispatch_id="d1", claim_token=second.claim_token),
    )


def step(count: int, fence: Fence, text: str) -> Checkpoint:
    return Checkpoint(
        thread_id="t1",
        expected_message_count=count,
        messages=[Message.user(text)],
        run=RunRecord(run_id="r1", thread_id="t1", agent_id="coder"),
        fence=fence,
    )


async def test_a_stale_holder_writes_no_checkpoint_and_the_current_one_does(store: Store) -> None:
    stale, current = await taken_over(store)
    with pytest.raises(Fenced, match="continued elsewhere"):
        await store.checkpoint(step(0, stale, "from the paused holder"))
    assert await store.load_thread("t1") is None  # nothing of it was written
    await store.checkpoint(step(0, current, "from the new holder"))
    loaded = await store.load_thread("t1")
    assert loaded is not None and [m.text for m in loaded.messages] == ["from the new holder"]
    assert await store.mailbox.holds(current, 9_000) and not await store.mailbox.holds(stale, 9_000)


async def test_a_stale_holder_cannot_mark_an_effect_started(store: Store) -> None:
    stale, current = await taken_over(store)
    mb = store.mailbox
    with pytest.raises(Fenced):
        await mb.effect_started(
            EffectRecord(thread_id="t1", call_id="c1", run_id="r1", tool_name="append", arguments={"line": "x"}), stale
        )
    assert await mb.open_effects("t1") == []  # no mark, so the effect never runs under the lost claim
    await mb.effect_started(
        EffectRecord(thread_id="t1", call_id="c1", run_id="r1", tool_name="append", arguments={"line": "x"}), current
    )
    with pytest.raises(Fenced):
        await mb.effect_finished("t1", "c1", None, 9_000, stale)
    with pytest.raises(Fenced):
        await mb.mark_effects_unknown("t1", ["c1"], 9_000, stale)
    assert [(e.call_id, e.status) for e in await mb.open_effects("t1")] == [("c1", "started")]


async def test_a_settled_claim_fences_its_holder_too(store: Store) -> None:
    """Acked (the run was decided and finished elsewhere) or requeued: either way the old token writes nothing."""
    mb = store.mailbox
    row = await mb.enqueue_and_claim(
        RunDispatch(dispatch_id="d1", thread_id="t1", run_id="r1", created_at=1, updated_at=1), "w", LEASE, 1000
    )
    assert row is not None and row.claim_token
    fence = Fence(dispatch_id="d1", claim_token=row.claim_token)
    await store.checkpoint(step(0, fence, "first"))
    await mb.ack("d1", row.claim_token, 2000)
    with pytest.raises(Fenced):
        await store.checkpoint(step(1, fence, "after the ack"))
    loaded = await store.load_thread("t1")
    assert loaded is not None and [m.text for m in loaded.messages] == ["first"]

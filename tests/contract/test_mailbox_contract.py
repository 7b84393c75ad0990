"""The mailbox store contract (``contract/mailbox.py``), run on every backend via ``store``. Times are explicit ms."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from awaken_stdio.contract.errors import AlreadyExists, NotFound, VersionConflict
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import (
    DispatchRequest,
    EffectRecord,
    InvalidDispatch,
    MailboxStore,
    RunDispatch,
    retry_delay_ms,
)
from awaken_stdio.contract.messages import Message, ToolCall
from awaken_stdio.contract.stores import Checkpoint, RunRecord, Store
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.stores import open_store

pytestmark = pytest.mark.anyio

LEASE = 30_000


def dispatch(dispatch_id: str, thread_id: str = "t1", *, at: int = 1000, **kw: Any) -> RunDispatch:
    return RunDispatch(
        dispatch_id=dispatch_id, thread_id=thread_id, run_id=f"run-{dispatch_id}", created_at=at, updated_at=at, **kw
    )


@pytest.fixture
def mb(store: Store) -> MailboxStore:
    return store.mailbox


async def claimed(mb: MailboxStore, d: RunDispatch, now: int = 2000) -> RunDispatch:
    await mb.enqueue(d)
    (c,) = await mb.claim(d.thread_id, "worker-1", LEASE, now)
    return c


async def test_enqueue_and_list(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("d1"))
    (row,) = await mb.list_dispatches("t1")
    assert (row.dispatch_id, row.status, row.attempt_count, row.max_attempts) == ("d1", "queued", 0, 5)


async def test_rows_round_trip_every_field(mb: MailboxStore) -> None:
    request = DispatchRequest(
        kind="decide",
        agent_id="coder",
        messages=(Message.user("héllo"),),
        decisions=(("perm_c1", ToolCallResume.approve(always=True)),),
        origin="cli",
        session_id="sess_1",
        cwd="/work",
        sender="host:1:a",
    )
    d = dispatch("d1", request=request, priority=7, dedupe_key="k", available_at=5, max_attempts=3)
    await mb.enqueue(d)
    c = await mb.claim_dispatch("d1", "w", LEASE, 2000)
    assert c is not None
    await mb.record_run_result("d1", c.claim_token or "", "done", TerminationReason.stopped("x", "y"), "r", "e", 2100)
    loaded = await mb.load_dispatch("d1")
    assert loaded is not None
    assert loaded.request == request
    assert (loaded.priority, loaded.dedupe_key, loaded.available_at, loaded.max_attempts) == (7, "k", 5, 3)
    assert (loaded.run_status, loaded.termination, loaded.run_response, loaded.run_error) == (
        "done",
        TerminationReason.stopped("x", "y"),
        "r",
        "e",
    )
    assert loaded.completed_at == 2100 and loaded.claimed_by == "w" and loaded.lease_until == 2000 + LEASE
    assert loaded.to_json() == RunDispatch.from_json(loaded.to_json()).to_json()


async def test_enqueue_takes_the_epoch_from_the_store(mb: MailboxStore) -> None:
    stored = await mb.enqueue(dispatch("d1", dispatch_epoch=999))
    assert stored.dispatch_epoch == 0
    assert (await mb.load_dispatch("d1")).dispatch_epoch == 0  # type: ignore[union-attr]
    assert await mb.current_dispatch_epoch("t1") == 0


async def test_an_invalid_dispatch_is_refused(mb: MailboxStore) -> None:
    with pytest.raises(InvalidDispatch, match="non-empty"):
        await mb.enqueue(dispatch("d1", thread_id=""))
    with pytest.raises(InvalidDispatch, match="max_attempts"):
        await mb.enqueue(dispatch("d2", max_attempts=0))
    with pytest.raises(InvalidDispatch, match="queued dispatch has no claim"):
        await mb.enqueue(dispatch("d3", run_status="running"))
    assert await mb.list_dispatches("t1") == []


async def test_claim_returns_queued_dispatch(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1"))
    assert (c.status, c.claimed_by, c.lease_until) == ("claimed", "worker-1", 2000 + LEASE)
    assert c.claim_token
    assert await mb.claim("t1", "worker-2", LEASE, 2001) == []  # no double claim


async def test_claim_respects_available_at(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("d1", available_at=5000))
    assert await mb.claim("t1", "w", LEASE, 4999) == []
    assert [d.dispatch_id for d in await mb.claim("t1", "w", LEASE, 5000)] == ["d1"]


async def test_claim_respects_priority_before_created_at(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("old", at=1000, priority=200))
    await mb.enqueue(dispatch("new", at=2000, priority=10))
    assert [d.dispatch_id for d in await mb.claim("t1", "w", LEASE, 3000)] == ["new"]


async def test_fifo_ordering_within_same_priority(mb: MailboxStore) -> None:
    for i, at in enumerate([3000, 1000, 2000]):
        await mb.enqueue(dispatch(f"d{i}", at=at))
    order = []
    for now in range(5000, 5003):
        (c,) = await mb.claim("t1", "w", LEASE, now)
        order.append(c.dispatch_id)
        await mb.ack(c.dispatch_id, c.claim_token or "", now)
    assert order == ["d1", "d2", "d0"]


async def test_claim_limit_preserves_thread_exclusivity(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("d1", at=1))
    await mb.enqueue(dispatch("d2", at=2))
    (c,) = await mb.claim("t1", "w", LEASE, 100)
    assert await mb.claim("t1", "w", LEASE, 101, limit=5) == []
    await mb.ack(c.dispatch_id, c.claim_token or "", 102)
    assert [d.dispatch_id for d in await mb.claim("t1", "w", LEASE, 103)] == ["d2"]


async def test_claim_honors_batch_limit_without_active_claim(mb: MailboxStore) -> None:
    for i in range(3):
        await mb.enqueue(dispatch(f"d{i}", at=i))
    batch = await mb.claim("t1", "w", LEASE, 100, limit=2)
    assert [d.dispatch_id for d in batch] == ["d0", "d1"]
    assert len({d.claim_token for d in batch}) == 1


async def test_per_thread_isolation(mb: MailboxStore) -> None:
    await claimed(mb, dispatch("a", "t1"))
    await mb.enqueue(dispatch("b", "t2"))
    assert [d.dispatch_id for d in await mb.claim("t2", "w", LEASE, 2000)] == ["b"]


async def test_list_dispatches_orders_by_priority_then_created_at_and_filters(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("c", at=3, priority=1))
    await mb.enqueue(dispatch("a", at=1))
    await mb.enqueue(dispatch("b", at=2))
    await claimed(mb, dispatch("x", "t2"))
    assert [d.dispatch_id for d in await mb.list_dispatches("t1")] == ["c", "a", "b"]
    assert [d.dispatch_id for d in await mb.list_dispatches("t1", limit=1, offset=1)] == ["a"]
    assert await mb.list_dispatches("t1", ["claimed"]) == []
    assert [d.dispatch_id for d in await mb.list_dispatches("t2", ["claimed"])] == ["x"]


async def test_ack_transitions_to_acked(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1"))
    acked = await mb.ack("d1", c.claim_token or "", 2500)
    assert (acked.status, acked.claim_token, acked.claimed_by, acked.lease_until) == ("acked", None, None, None)
    assert acked.completed_at == 2500


async def test_ack_rejects_wrong_claim_token(mb: MailboxStore) -> None:
    await claimed(mb, dispatch("d1"))
    with pytest.raises(VersionConflict):
        await mb.ack("d1", "not-the-token", 2500)
    with pytest.raises(NotFound):
        await mb.ack("nope", "x", 2500)
    assert (await mb.load_dispatch("d1")).status == "claimed"  # type: ignore[union-attr]


async def test_nack_returns_to_queued(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1"))
    await mb.record_dispatch_start("d1", c.claim_token or "", "inst", 2100)
    row = await mb.nack("d1", c.claim_token or "", 9000, "boom", 2200)
    assert (row.status, row.attempt_count, row.available_at, row.last_error) == ("queued", 1, 9000, "boom")
    assert not row.has_projection() and row.claim_token is None and row.completed_at is None
    assert await mb.claim("t1", "w", LEASE, 8999) == []
    assert [d.dispatch_id for d in await mb.claim("t1", "w", LEASE, 9000)] == ["d1"]  # claim after nack


async def test_nack_dead_letters_after_max_attempts(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1", max_attempts=2))
    await mb.nack("d1", c.claim_token or "", 2000, "first", 2000)
    (c,) = await mb.claim("t1", "w", LEASE, 2001)
    row = await mb.nack("d1", c.claim_token or "", 3000, "second", 2002)
    assert (row.status, row.attempt_count, row.last_error) == ("dead_letter", 2, "second")
    assert row.completed_at == 2002 and row.claim_token is None


async def test_dead_letter_explicit(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1"))
    row = await mb.dead_letter("d1", c.claim_token or "", "permanent", 2100)
    assert (row.status, row.last_error, row.attempt_count, row.claim_token) == ("dead_letter", "permanent", 0, None)


async def test_cancel_queued_and_not_claimed(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("q"))
    cancelled = await mb.cancel("q", 1500)
    assert cancelled is not None and cancelled.status == "cancelled" and cancelled.completed_at == 1500
    c = await claimed(mb, dispatch("c", "t2"))
    assert await mb.cancel("c", 2100) is None
    assert (await mb.load_dispatch("c")).status == "claimed"  # type: ignore[union-attr]
    assert c.status == "claimed" and await mb.cancel("missing", 1) is None


async def test_extend_lease(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1"))
    assert await mb.extend_lease("d1", c.claim_token or "", 30_000, 45_000)
    assert (await mb.load_dispatch("d1")).lease_until == 75_000  # type: ignore[union-attr]
    assert not await mb.extend_lease("d1", "wrong", 30_000, 50_000)
    assert (await mb.load_dispatch("d1")).lease_until == 75_000  # type: ignore[union-attr]


async def test_interrupt_supersedes_queued(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("a"))
    await mb.enqueue(dispatch("b"))
    result = await mb.interrupt("t1", 5000)
    assert result.epoch >= 1 and result.active is None
    assert sorted(d.dispatch_id for d in result.superseded) == ["a", "b"]
    rows = await mb.list_dispatches("t1")
    assert {d.status for d in rows} == {"superseded"}
    assert rows[0].last_error == "queued dispatch superseded by interrupt"
    assert await mb.current_dispatch_epoch("t1") == result.epoch
    fresh = await mb.enqueue(dispatch("c"))
    assert fresh.dispatch_epoch == result.epoch


async def test_interrupt_returns_active_claimed(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("active", at=1))
    await mb.enqueue(dispatch("queued", at=2))
    result = await mb.interrupt("t1", 5000)
    assert result.active is not None and result.active.dispatch_id == c.dispatch_id
    assert [d.dispatch_id for d in result.superseded] == ["queued"]


async def test_current_dispatch_epoch_tracks_interrupt(mb: MailboxStore) -> None:
    assert await mb.current_dispatch_epoch("t1") == 0
    first = await mb.interrupt("t1", 1)
    second = await mb.interrupt("t1", 2)
    assert (first.epoch, second.epoch, await mb.current_dispatch_epoch("t1")) == (1, 2, 2)


async def test_supersede_claimed_terminalizes_active_dispatch(mb: MailboxStore) -> None:
    await claimed(mb, dispatch("d1"))
    row = await mb.supersede_claimed("d1", "replaced", 2500)
    assert row is not None and (row.status, row.lease_until, row.completed_at) == ("superseded", None, 2500)
    assert await mb.supersede_claimed("d1", "again", 2600) is None


async def test_a_stale_claim_can_do_nothing_after_interrupt(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1"))
    await mb.interrupt("t1", 2100)
    assert not await mb.extend_lease("d1", c.claim_token or "", LEASE, 2200)
    assert (await mb.load_dispatch("d1")).status == "superseded"  # type: ignore[union-attr]

    c2 = await claimed(mb, dispatch("d2", "t2"))
    await mb.interrupt("t2", 2100)
    with pytest.raises(VersionConflict):
        await mb.record_dispatch_start("d2", c2.claim_token or "", "inst", 2200)
    row = await mb.load_dispatch("d2")
    assert row is not None and row.status == "superseded" and not row.has_projection()

    c3 = await claimed(mb, dispatch("d3", "t3"))
    await mb.interrupt("t3", 2100)
    with pytest.raises(VersionConflict):
        await mb.ack("d3", c3.claim_token or "", 2200)
    assert (await mb.load_dispatch("d3")).status == "superseded"  # type: ignore[union-attr]


async def test_reclaim_expired_stale_claim_supersedes(mb: MailboxStore) -> None:
    await claimed(mb, dispatch("d1"))
    await mb.interrupt("t1", 2100)
    assert await mb.reclaim_expired_leases(2000 + LEASE + 1) == []
    assert (await mb.load_dispatch("d1")).status == "superseded"  # type: ignore[union-attr]


async def test_dedupe_key_rejects_duplicate(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("d1", dedupe_key="k"))
    with pytest.raises(AlreadyExists):
        await mb.enqueue(dispatch("d2", dedupe_key="k"))
    await mb.enqueue(dispatch("d3", "t2", dedupe_key="k"))  # another thread: fine
    await mb.cancel("d1", 1500)
    await mb.enqueue(dispatch("d4", dedupe_key="k"))  # the first is terminal now


async def test_reclaim_expired_leases_requeues(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1"))
    await mb.record_dispatch_start("d1", c.claim_token or "", "inst", 2001)
    assert await mb.reclaim_expired_leases(2000 + LEASE) == []  # not expired yet
    (row,) = await mb.reclaim_expired_leases(2000 + LEASE + 1)
    assert (row.status, row.attempt_count, row.claim_token) == ("queued", 1, None)
    assert not row.has_projection() and row.available_at <= 2000 + LEASE + 1


async def test_reclaim_expired_leases_dead_letters_at_max_attempts(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1", max_attempts=1))
    await mb.record_dispatch_start("d1", c.claim_token or "", "inst", 2001)
    (row,) = await mb.reclaim_expired_leases(2000 + LEASE + 1)
    assert (row.status, row.attempt_count) == ("dead_letter", 1) and not row.has_projection()


async def test_reclaim_expired_leases_is_idempotent_under_concurrency(store_url: str) -> None:
    if store_url == "memory://":
        pytest.skip("two handles on one memory store do not exist")
    async with open_store(store_url) as a, open_store(store_url) as b:
        c = await claimed(a.mailbox, dispatch("d1", max_attempts=1))
        results: list[list[RunDispatch]] = []

        async def sweep(mb: MailboxStore) -> None:
            results.append(await mb.reclaim_expired_leases((c.lease_until or 0) + 1))

        async with anyio.create_task_group() as tg:
            tg.start_soon(sweep, a.mailbox)
            tg.start_soon(sweep, b.mailbox)
        assert sorted(len(r) for r in results) == [0, 1]
        assert await a.mailbox.reclaim_expired_leases(10**12) == []
        assert (await a.mailbox.load_dispatch("d1")).status == "dead_letter"  # type: ignore[union-attr]


async def test_concurrent_claims_have_one_winner(store_url: str) -> None:
    async with open_store(store_url) as a:
        mbs = [a.mailbox]
        second = None if store_url == "memory://" else await open_store(store_url)
        try:
            mbs.append(second.mailbox if second is not None else a.mailbox)
            await a.mailbox.enqueue(dispatch("d1"))
            await a.mailbox.enqueue(dispatch("d2", at=2000))
            got: list[Any] = []

            async def by_scan(mb: MailboxStore) -> None:
                got.extend(await mb.claim("t1", "w", LEASE, 5000))

            async def by_id(mb: MailboxStore) -> None:
                if (d := await mb.claim_dispatch("d2", "w", LEASE, 5000)) is not None:
                    got.append(d)

            async with anyio.create_task_group() as tg:
                for mb in mbs:
                    tg.start_soon(by_scan, mb)
                    tg.start_soon(by_id, mb)
            assert len(got) == 1
        finally:
            if second is not None:
                await second.aclose()


async def test_concurrent_enqueue_loses_nothing(mb: MailboxStore) -> None:
    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(mb.enqueue, dispatch(f"d{i:02}", at=i))
    assert len(await mb.list_dispatches("t1")) == 20


async def test_purge_terminal_removes_old(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("old"))
    await mb.ack("old", c.claim_token or "", 3000)
    await mb.enqueue(dispatch("queued", "t2"))
    c = await claimed(mb, dispatch("recent", "t3"))
    await mb.ack("recent", c.claim_token or "", 9000)
    assert await mb.purge_terminal(5000) == 1
    assert await mb.load_dispatch("old") is None
    assert await mb.load_dispatch("queued") is not None and await mb.load_dispatch("recent") is not None


async def test_queued_thread_ids_returns_active_threads(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("a", "tb"))
    await mb.enqueue(dispatch("b", "ta", available_at=9000))
    await claimed(mb, dispatch("c", "tc"))
    assert await mb.queued_thread_ids() == ["ta", "tb"]
    assert await mb.queued_thread_ids(5000) == ["tb"]


async def test_count_dispatches_by_status_tracks_lifecycle(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("a"))
    assert await mb.count_dispatches_by_status() == {"queued": 1}
    (c,) = await mb.claim("t1", "w", LEASE, 2000)
    assert await mb.count_dispatches_by_status() == {"claimed": 1}
    await mb.ack("a", c.claim_token or "", 2001)
    await mb.enqueue(dispatch("b"))
    assert await mb.count_dispatches_by_status() == {"acked": 1, "queued": 1}


async def test_list_terminal_dispatches_returns_all_terminal(mb: MailboxStore) -> None:
    for i, thread in enumerate(["t1", "t2", "t3"]):
        await mb.enqueue(dispatch(f"d{i}", thread, at=i))
        await mb.cancel(f"d{i}", 10 + i)
    await mb.enqueue(dispatch("live", "t4"))
    assert [d.dispatch_id for d in await mb.list_terminal_dispatches()] == ["d0", "d1", "d2"]
    assert [d.dispatch_id for d in await mb.list_terminal_dispatches(limit=2, offset=1)] == ["d1", "d2"]


async def test_claim_dispatch_by_id_ignores_available_at(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("later", available_at=10**12))
    assert await mb.claim("t1", "w", LEASE, 2000) == []
    c = await mb.claim_dispatch("later", "w", LEASE, 2000)
    assert c is not None and c.status == "claimed"
    await mb.enqueue(dispatch("other"))
    assert await mb.claim_dispatch("other", "w", LEASE, 2000) is None  # the thread already has a claim
    assert await mb.claim_dispatch("missing", "w", LEASE, 2000) is None


async def test_claim_dispatch_refuses_a_stale_epoch(mb: MailboxStore) -> None:
    await mb.enqueue(dispatch("d1"))
    await mb.interrupt("t1", 1500)
    assert await mb.claim_dispatch("d1", "w", LEASE, 2000) is None
    assert (await mb.load_dispatch("d1")).status == "superseded"  # type: ignore[union-attr]


async def test_record_dispatch_start_and_run_result_are_separate_from_ack(mb: MailboxStore) -> None:
    c = await claimed(mb, dispatch("d1"))
    token = c.claim_token or ""
    started = await mb.record_dispatch_start("d1", token, "inst-1", 2100)
    assert (started.status, started.run_status, started.dispatch_instance_id) == ("claimed", "running", "inst-1")
    done = await mb.record_run_result("d1", token, "done", TerminationReason.natural(), "hi", None, 2200)
    assert (done.status, done.run_status, done.run_response, done.completed_at) == ("claimed", "done", "hi", 2200)
    assert done.termination == TerminationReason.natural()
    acked = await mb.ack("d1", token, 2300)
    assert (acked.status, acked.run_status, acked.completed_at) == ("acked", "done", 2200)


async def test_record_projection_rejects_missing_or_unclaimed_dispatch(mb: MailboxStore) -> None:
    with pytest.raises(NotFound):
        await mb.record_run_result("missing", "t", "done", None, None, None, 1)
    await mb.enqueue(dispatch("q"))
    with pytest.raises(VersionConflict):
        await mb.record_dispatch_start("q", "t", "inst", 1)
    assert not (await mb.load_dispatch("q")).has_projection()  # type: ignore[union-attr]


async def test_enqueue_and_claim_claims_only_a_free_thread(mb: MailboxStore) -> None:
    first = await mb.enqueue_and_claim(dispatch("a"), "w1", LEASE, 2000)
    assert first is not None and first.status == "claimed" and first.claimed_by == "w1"
    second = await mb.enqueue_and_claim(dispatch("b"), "w2", LEASE, 2001)
    assert second is not None and second.status == "queued"
    assert await mb.enqueue_and_claim(dispatch("c"), "w2", LEASE, 2002, queue_if_busy=False) is None
    assert await mb.load_dispatch("c") is None
    assert [d.dispatch_id for d in await mb.queued_for_holder("w1")] == ["b"]
    assert await mb.queued_for_holder("w2") == []


async def test_transfer_claim_hands_the_thread_to_a_queued_dispatch(mb: MailboxStore) -> None:
    holder = await mb.enqueue_and_claim(dispatch("a"), "w1", LEASE, 2000)
    assert holder is not None
    await mb.enqueue(dispatch("decision", at=2001))
    moved = await mb.transfer_claim("a", holder.claim_token or "", "decision", LEASE, 3000)
    assert moved is not None and (moved.status, moved.claimed_by, moved.lease_until) == ("claimed", "w1", 33_000)
    # started by its holder with the claim, as enqueue_and_claim starts a row (no second write to say so)
    assert (moved.dispatch_instance_id, moved.run_status) == ("w1", "running")
    assert await mb.load_dispatch("decision") == moved
    assert (await mb.load_dispatch("a")).status == "acked"  # type: ignore[union-attr]
    assert await mb.transfer_claim("decision", moved.claim_token or "", "decision", LEASE, 3001) is None
    with pytest.raises(VersionConflict):
        await mb.transfer_claim("a", holder.claim_token or "", "decision", LEASE, 3002)


async def test_list_claimed(mb: MailboxStore) -> None:
    await claimed(mb, dispatch("a", "t1"))
    await mb.enqueue(dispatch("b", "t2"))
    assert [d.dispatch_id for d in await mb.list_claimed()] == ["a"]


async def test_effect_ledger_records_started_finished_and_unknown(mb: MailboxStore) -> None:
    await mb.effect_started(
        EffectRecord(
            thread_id="t1",
            call_id="c1",
            run_id="r1",
            tool_name="append",
            arguments={"line": "x"},
            decision_id="dec",
            started_at=10,
        )
    )
    await mb.effect_started(
        EffectRecord(
            thread_id="t1", call_id="c2", run_id="r1", tool_name="append", arguments={"line": "y"}, started_at=11
        )
    )
    await mb.effect_started(
        EffectRecord(thread_id="t2", call_id="c9", run_id="r2", tool_name="append", arguments=None, started_at=12)
    )
    await mb.effect_finished("t1", "c2", {"status": "success", "data": 1}, 20)
    open_ = await mb.open_effects("t1")  # a finished entry is settled: not open
    assert [(e.call_id, e.status, e.decision_id, e.arguments) for e in open_] == [
        ("c1", "started", "dec", {"line": "x"})
    ]
    await mb.mark_effects_unknown("t1", ["c1", "c2"], 30)  # only a started entry becomes unknown
    assert [(e.call_id, e.status) for e in await mb.open_effects("t1")] == [("c1", "unknown_after_crash")]
    assert [e.call_id for e in await mb.open_effects("t2")] == ["c9"]
    assert await mb.purge_terminal(25) == 0
    assert [e.call_id for e in await mb.open_effects("t1")] == ["c1"]  # an unknown outcome is never purged
    await mb.effect_started(
        EffectRecord(
            thread_id="t1", call_id="c2", run_id="r3", tool_name="append", arguments={"line": "y"}, started_at=40
        )
    )
    assert [(e.call_id, e.run_id) for e in await mb.open_effects("t1")] == [("c1", "r1"), ("c2", "r3")]


async def test_a_checkpoint_appending_a_result_settles_its_open_entry(store: Store) -> None:
    """The result in the conversation is the finished mark: the loop writes no separate one (issue 16). An entry
    offered again after a crash (unknown) and answered is settled too, so no later run reads it again."""
    mb = store.mailbox
    await mb.effect_started(
        EffectRecord(thread_id="t1", call_id="c1", run_id="r1", tool_name="append", arguments={}, started_at=10)
    )
    await mb.effect_started(
        EffectRecord(thread_id="t1", call_id="c2", run_id="r1", tool_name="append", arguments={}, started_at=11)
    )
    await mb.effect_started(
        EffectRecord(thread_id="t1", call_id="c3", run_id="r1", tool_name="append", arguments={}, started_at=12)
    )
    await mb.mark_effects_unknown("t1", ["c3"], 13)
    call = Message.assistant(
        "", [ToolCall(id="c1", name="append", arguments={}), ToolCall(id="c3", name="append", arguments={})]
    )
    messages = [Message.user("go"), call, Message.tool("c1", "ok"), Message.tool("c3", "again")]
    await store.checkpoint(
        Checkpoint(
            thread_id="t1",
            expected_message_count=0,
            messages=messages,
            run=RunRecord(run_id="r1", thread_id="t1", agent_id="coder"),
        )
    )
    assert [(e.call_id, e.status) for e in await mb.open_effects("t1")] == [("c2", "started")]
    loaded, effects = await store.load_thread_for_run("t1")  # the same entries, read with the thread
    assert loaded is not None and len(loaded.messages) == 4
    assert [e.call_id for e in effects] == ["c2"]
    assert await store.load_thread_for_run("t-none") == (None, [])


def test_retry_delay_doubles_from_250_ms_to_30_s() -> None:
    assert [retry_delay_ms(n) for n in (1, 2, 3, 4, 7, 8, 50)] == [250, 500, 1000, 2000, 16_000, 30_000, 30_000]

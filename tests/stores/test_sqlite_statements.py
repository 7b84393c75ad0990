"""What one SQLite transaction of the mailbox runs (issue 30): writes are serialised by ``BEGIN IMMEDIATE``, so a
thread's lock only reads its epoch (the row and its epoch in one statement) and no transaction rewrites a
``thread_dispatch_epochs`` row it does not change: every page a transaction dirties is written to the WAL at COMMIT,
and COMMIT costs about ten microseconds a page."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken_stdio.app.dispatch import MailboxConfig, MailboxService
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.mailbox import DispatchRequest, RunDispatch
from awaken_stdio.contract.messages import Message
from awaken_stdio.stores import open_store
from awaken_stdio.stores.sqlite import SqliteStore
from tests.mailbox.test_service import APPROVE, guarded

pytestmark = pytest.mark.anyio


def dispatch(thread_id: str) -> RunDispatch:
    now = now_ms()
    return RunDispatch(
        dispatch_id=new_id(),
        thread_id=thread_id,
        run_id=new_id(),
        request=DispatchRequest(kind="run"),
        created_at=now,
        updated_at=now,
    )


async def writes_of(store: SqliteStore) -> list[str]:
    """Start tracing the writer's statements; the list fills as they run."""
    seen: list[str] = []
    await store._writer.call(lambda conn: conn.set_trace_callback(lambda sql: seen.append(" ".join(sql.split()))))
    return seen


async def test_a_settle_reads_its_row_and_epoch_in_one_statement_and_writes_only_the_row(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        row = await store.mailbox.enqueue_and_claim(dispatch("t"), "me", 60_000, now_ms())
        assert row is not None and row.claim_token is not None
        seen = await writes_of(store)
        await store.mailbox.ack(row.dispatch_id, row.claim_token, now_ms())
        kinds = [sql.split()[0] for sql in seen]
        assert kinds == ["BEGIN", "SELECT", "UPDATE", "SELECT", "COMMIT"], seen
        assert "thread_dispatch_epochs" in seen[1] and seen[2].startswith("UPDATE run_dispatches"), seen
        assert "status IN ('queued')" in seen[3], seen  # whether the release leaves work a poller should wake for


async def test_the_epoch_row_is_written_once_per_thread(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        seen = await writes_of(store)
        await store.mailbox.enqueue(dispatch("t"))
        await store.mailbox.enqueue(dispatch("t"))
        epoch_writes = [sql for sql in seen if sql.startswith(("INSERT", "UPDATE")) and "thread_dispatch_epochs" in sql]
        assert len(epoch_writes) == 1, seen
        assert await store.mailbox.current_dispatch_epoch("t") == 0
        await store.mailbox.interrupt("t", now_ms())  # the epoch still moves on, under the same write lock
        assert await store.mailbox.current_dispatch_epoch("t") == 1


async def test_an_approval_cycle_writes_five_transactions_of_few_statements(tmp_path: Path) -> None:
    """Submit (its claim; the checkpoint that waits, acking its row), then decide (the decision's claim, the effect's
    ``started`` mark, the checkpoint that ends the run and acks the row): five write transactions, 39 statements
    with their BEGINs and COMMITs (46 while each mailbox transaction upserted the thread's epoch row and a
    checkpoint read its dispatch again to settle it)."""
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        runtime, tool = guarded(store)
        service = MailboxService(runtime=runtime, config=MailboxConfig(dispatch_queued=False))
        seen = await writes_of(store)
        waiting = await service.submit(RunActivation(messages=[Message.user("go")], thread_id="t1"))
        done = await service.decide(waiting.run_id, APPROVE)
        assert done is not None and done.status == "completed" and len(tool.calls) == 1
        assert sum(sql.startswith("BEGIN IMMEDIATE") for sql in seen) == 5, seen
        assert len(seen) <= 39, seen
        # the two checkpoints that settle their rows check their fence first: the row is read once for both
        settling = [i for i, sql in enumerate(seen) if sql.startswith("UPDATE run_dispatches")]
        for end in settling:
            begin = max(i for i in range(end) if seen[i].startswith("BEGIN"))
            assert sum("FROM run_dispatches" in sql for sql in seen[begin:end]) == 1, seen[begin:end]

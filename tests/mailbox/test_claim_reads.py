"""A dispatched run starts from the thread as its claim read it (issue 16): the claim's transaction reads the thread
and its open effect-ledger entries, so neither a submitted run nor a decided one reads them again; only the
decider's check that the run still waits is a read of its own. The run then sees what the claim saw."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken_stdio.app.dispatch import MailboxConfig, MailboxService
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import ThreadRecord
from awaken_stdio.stores import open_store
from tests.mailbox.test_service import APPROVE, guarded
from tests.runtime.test_effect_marks import count_reads

pytestmark = pytest.mark.anyio


async def test_a_submitted_and_a_decided_run_read_their_thread_with_their_claims(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        runtime, tool = guarded(store)
        service = MailboxService(runtime=runtime, config=MailboxConfig(dispatch_queued=False))
        await store.save_thread(ThreadRecord(thread_id="t1", title="stored before"))
        reads = count_reads(store)
        waiting = await service.submit(RunActivation(messages=[Message.user("go")], thread_id="t1"))
        assert waiting.status == "waiting" and reads == []
        done = await service.decide(waiting.run_id, APPROVE)
        assert done is not None and done.status == "completed" and len(tool.calls) == 1
        # the decider's checks before it records the decision: the run waits, and no call of it has an unknown
        # outcome (the effect ledger; its claims are read only when the ledger has an open entry)
        assert len(reads) == 2
        loaded = await store.load_thread("t1")
        assert loaded is not None and loaded.thread.title == "stored before"
        assert [m.role for m in loaded.messages] == ["user", "assistant", "tool", "assistant"]

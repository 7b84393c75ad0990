"""The mailbox's wake-up: a decision queued (or a claim moved or settled) wakes the pollers at once instead of at
their next tick; in this process on every backend, and on PostgreSQL in every process sharing the database
(LISTEN/NOTIFY). A nudge only ever comes early: a waiter still wakes at its own interval without one."""

from __future__ import annotations

import time

import anyio
import pytest

from awaken_stdio.contract.ids import new_id
from awaken_stdio.contract.mailbox import RunDispatch
from awaken_stdio.contract.wakeup import Wakeup
from awaken_stdio.stores import open_store

pytestmark = pytest.mark.anyio
LONG_S = 5.0  # the poll interval the waits stand for: a wake-up must come well before it


async def waited(wakeup: Wakeup, timeout: float = LONG_S) -> float:
    started = time.perf_counter()
    await wakeup.wait(timeout)
    return time.perf_counter() - started


async def test_a_set_wakes_every_waiter() -> None:
    wakeup = Wakeup()
    took: list[float] = []

    async def wait() -> None:
        took.append(await waited(wakeup))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        tg.start_soon(wait)
        await anyio.sleep(0.05)
        wakeup.set()
    assert len(took) == 2 and max(took) < 1


async def test_a_set_nobody_waited_for_wakes_the_next_wait_only() -> None:
    wakeup = Wakeup()
    wakeup.set()
    assert await waited(wakeup) < 1
    assert await waited(wakeup, 0.2) >= 0.2  # consumed: the next one waits its interval


async def test_a_queued_decision_wakes_this_process(store_url: str) -> None:
    async with open_store(store_url) as store:
        mb = store.mailbox
        await mb.enqueue_and_claim(
            RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r1"), "holder", 60_000, 1000
        )
        await waited(mb.wakeup, 0)  # whatever the claim said is consumed
        await mb.enqueue(
            RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r1")
        )  # a decision, queued behind the holder
        assert await waited(mb.wakeup) < 1


async def test_postgresql_tells_the_other_processes(pg_url: str) -> None:
    async with open_store(pg_url) as deciders, open_store(pg_url) as holders:
        await holders.mailbox.enqueue_and_claim(
            RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r1"), "holder", 60_000, 1000
        )
        await waited(holders.mailbox.wakeup, 0.2)  # its own write's nudge, consumed
        took: list[float] = []

        async def hold() -> None:
            took.append(await waited(holders.mailbox.wakeup))

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await anyio.sleep(0.1)
            row, _ = await deciders.claim_for_run(
                RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r1"), "decider", 60_000, 2000
            )
            assert row is not None and row.status == "queued"  # the holder has the thread: the decision waits
        assert took[0] < 1  # told at once, not at the holder's next poll

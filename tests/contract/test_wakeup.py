"""The mailbox's wake-up: a decision queued (or a claim moved or released to someone waiting) wakes the pollers at once
instead of at their next tick; in this process on every backend, and on PostgreSQL in every process sharing the
database (LISTEN/NOTIFY). Where nothing pushes, a nudge only ever comes early: a waiter still wakes at its own
interval without one; while pushed, that interval is only a slow safety sweep."""

from __future__ import annotations

import time

import anyio
import pytest

from awaken_stdio.contract.ids import new_id
from awaken_stdio.contract.mailbox import RunDispatch
from awaken_stdio.contract.wakeup import PUSHED_POLL_S, Wakeup
from awaken_stdio.stores import open_store

pytestmark = pytest.mark.anyio
LONG_S = 5.0  # the poll interval the waits stand for: a wake-up must come well before it


async def waited(wakeup: Wakeup, timeout: float = LONG_S, since: int | None = None) -> float:
    """How long a poller that looked at ``since`` (else now) waits."""
    started = time.perf_counter()
    await wakeup.wait(timeout, wakeup.generation if since is None else since)
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


async def test_a_set_while_the_poller_looked_wakes_its_wait_though_another_waiter_took_it() -> None:
    wakeup = Wakeup()
    since = wakeup.generation  # the poller looks at the mailbox...
    async with anyio.create_task_group() as tg:
        tg.start_soon(waited, wakeup)  # ...while another waits
        await anyio.sleep(0.05)
        wakeup.set()  # the other waiter wakes, and the poller's next wait must not miss it
    assert await waited(wakeup, since=since) < 1
    assert await waited(wakeup, 0.2) >= 0.2  # a poller that looked after it waits its interval
    assert wakeup.ticks == 1


async def test_while_pushed_a_wait_is_a_slow_sweep_and_pushing_up_or_down_wakes_it() -> None:
    wakeup = Wakeup()
    assert wakeup.interval(0.2) == 0.2
    wakeup.push(True)
    assert wakeup.interval(0.2) == PUSHED_POLL_S and wakeup.interval(60) == 60
    took: list[float] = []

    async def wait() -> None:
        took.append(await waited(wakeup, 0.2))

    for up in (False, True):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(0.05)
            wakeup.push(up)  # a lost LISTEN: look now, then poll; one back: look for what was missed
    assert len(took) == 2 and max(took) < 0.15


async def test_a_queued_decision_wakes_this_process(store_url: str) -> None:
    async with open_store(store_url) as store:
        mb = store.mailbox
        await mb.enqueue_and_claim(
            RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r1"), "holder", 60_000, 1000
        )
        since = mb.wakeup.generation
        await mb.enqueue(
            RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r1")
        )  # a decision, queued behind the holder
        assert await waited(mb.wakeup, since=since) < 1


async def test_postgresql_tells_the_other_processes(pg_url: str) -> None:
    async with open_store(pg_url) as deciders, open_store(pg_url) as holders:
        await holders.mailbox.enqueue_and_claim(
            RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r1"), "holder", 60_000, 1000
        )
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


async def test_only_what_a_poller_acts_on_wakes_it(store_url: str) -> None:
    """A holder's own start, renewals, results and an ack with nothing behind it wake nobody (no poll per write on
    the approval's path); an ack with a row queued behind it does (a decider waits to claim the thread)."""
    async with open_store(store_url) as store:
        mb = store.mailbox
        [held] = [
            await mb.enqueue_and_claim(
                RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r1"), "holder", 60_000, 1000
            )
        ]
        assert held is not None and held.claim_token is not None
        since = mb.wakeup.generation
        await mb.record_dispatch_start(held.dispatch_id, held.claim_token, "holder", 1001)
        await mb.extend_lease(held.dispatch_id, held.claim_token, 60_000, 1002)
        await mb.record_run_result(held.dispatch_id, held.claim_token, "waiting", None, None, None, 1003)
        await mb.ack(held.dispatch_id, held.claim_token, 1004)
        assert mb.wakeup.generation == since
        again = await mb.enqueue_and_claim(
            RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r2"), "holder", 60_000, 2000
        )
        assert again is not None and again.claim_token is not None
        await mb.enqueue(
            RunDispatch(dispatch_id=new_id(), thread_id="t", run_id="r2")
        )  # a decision queued behind the holder
        since = mb.wakeup.generation
        await mb.ack(again.dispatch_id, again.claim_token, 2001)
        assert mb.wakeup.generation > since

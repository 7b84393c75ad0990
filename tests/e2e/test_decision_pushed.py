"""Decisions pushed, not polled, on PostgreSQL: with every process's poll interval a minute long, a decision taken in
one process reaches the run waiting in another, runs its call once and returns to the decider well under a second
later, so nothing on that path waits for a poll. With the LISTEN connection lost the pollers fall back to polling
and still deliver; when it comes back they look once, and find what was decided while nobody listened."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import asyncpg  # pyright: ignore[reportMissingTypeStubs]
import pytest

from awaken_stdio.app.app import App, load_settings, open_app
from awaken_stdio.app.claims import MailboxConfig
from awaken_stdio.contract.activation import RunActivation
from awaken_stdio.contract.events import AgentEvent, RunFinish
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.stores import postgres
from awaken_stdio.stores.postgres import RELISTEN_S
from bench.bench_decision import SCRIPT, drop, one_round, pg_store
from tests.contract.conftest import pg_server_url
from tests.e2e.crash_tools import CONFIG

LONG_POLL_S = 60.0  # a wait on the path that is a poll takes this long
APPROVE = [("perm_c1", ToolCallResume.approve())]
LISTENERS = """
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'"""


@pytest.fixture
async def pg_db() -> AsyncIterator[str]:
    server = pg_server_url()
    name, url = await pg_store(server)
    try:
        yield url
    finally:
        await drop(server, name)


@pytest.mark.anyio
async def test_a_decision_reaches_the_holder_in_another_process_without_polling(tmp_path: Path, pg_db: str) -> None:
    done = await one_round(tmp_path, pg_db, poll_s=LONG_POLL_S)  # checks that the call ran once
    assert done.seconds < 1 and done.returned < 1, done
    assert done.polls == 0


async def hold(app: App, tg: anyio.abc.TaskGroup) -> str:
    """A run of ``app`` waiting live for a decision on its one call; its id."""
    waiting = anyio.Event()
    run_ids: list[str] = []

    async def on_event(event: AgentEvent) -> None:
        if isinstance(event, RunFinish) and event.termination.type == "suspended":
            run_ids.append(event.run_id)
            waiting.set()

    activation = RunActivation(messages=[Message.user("append hello")], thread_id="t", wait_for_decisions=True)
    tg.start_soon(app.run, activation, on_event)
    with anyio.fail_after(30):
        await waiting.wait()
    return run_ids[0]


async def lose_listeners(url: str, *apps: App) -> None:
    """The database drops every LISTEN connection (a restart, a proxy's idle cut); each app notices."""
    conn = await asyncpg.connect(url)
    try:
        await conn.fetch(LISTENERS)
    finally:
        await conn.close()
    with anyio.fail_after(10):
        while any(app.store.mailbox.wakeup.pushed for app in apps):
            await anyio.sleep(0.01)


async def effect(out: Path) -> float:
    started = time.perf_counter()
    with anyio.fail_after(LONG_POLL_S / 2):
        while not out.exists():
            await anyio.sleep(0.005)
    return time.perf_counter() - started


def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    (tmp_path / "script.json").write_text(SCRIPT)
    (tmp_path / "config.toml").write_text(CONFIG)
    monkeypatch.setenv("CRASH_OUT", str(tmp_path / "out.txt"))
    monkeypatch.chdir(tmp_path)
    return str(tmp_path / "config.toml"), tmp_path / "out.txt"


@pytest.mark.anyio
async def test_with_the_listen_connection_lost_polling_still_delivers(
    tmp_path: Path, pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, out = world(tmp_path, monkeypatch)
    monkeypatch.setattr(postgres, "RELISTEN_S", (LONG_POLL_S,))  # the LISTEN stays lost for this test
    fast = MailboxConfig(poll_every_s=0.05)
    async with (
        open_app(load_settings(config, pg_db), mailbox=fast) as holder,
        open_app(load_settings(config, pg_db), serve=False, mailbox=fast) as decider,
        anyio.create_task_group() as tg,
    ):
        run_id = await hold(holder, tg)
        await lose_listeners(pg_db, holder, decider)
        tg.start_soon(decider.decide, run_id, APPROVE)
        await effect(out)  # found by polling: nothing is pushed
        assert not holder.store.mailbox.wakeup.pushed
    assert out.read_text() == "hello\n"


@pytest.mark.anyio
async def test_a_listen_connection_back_looks_for_what_was_decided_meanwhile(
    tmp_path: Path, pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, out = world(tmp_path, monkeypatch)
    slow = MailboxConfig(poll_every_s=LONG_POLL_S)
    async with (
        open_app(load_settings(config, pg_db), mailbox=slow) as holder,
        open_app(load_settings(config, pg_db), serve=False, mailbox=slow) as decider,
        anyio.create_task_group() as tg,
    ):
        run_id = await hold(holder, tg)
        await lose_listeners(pg_db, holder, decider)
        tg.start_soon(decider.decide, run_id, APPROVE)  # its NOTIFY reaches nobody
        took = await effect(out)
        assert took < RELISTEN_S[0] + 5  # the reconnect's look found it, not a poll a minute on
        assert holder.store.mailbox.wakeup.pushed
    assert out.read_text() == "hello\n"

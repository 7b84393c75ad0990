"""The store contract (``contract/stores.py``, ``contract/profile.py``), run on every backend via ``store``."""

from __future__ import annotations

import anyio
import pytest

from awaken_stdio.contract.errors import StoreUnavailable, VersionConflict
from awaken_stdio.contract.inference import TokenUsage
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import (
    ImageBlock,
    Message,
    ResourceLinkBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
)
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import (
    Checkpoint,
    PermissionGrant,
    RunRecord,
    SessionRecord,
    Store,
    ThreadRecord,
    WaitingState,
    WaitingTicket,
)
from awaken_stdio.stores import open_store

pytestmark = pytest.mark.anyio


def run(run_id: str = "run-1", thread_id: str = "t1", *, updated_at: int = 1000, **kw: object) -> RunRecord:
    return RunRecord(
        run_id=run_id, thread_id=thread_id, agent_id="coder", created_at=updated_at, updated_at=updated_at, **kw
    )  # type: ignore[arg-type]


def msgs(*texts: str) -> list[Message]:
    return [Message.user(t) for t in texts]


async def commit(store: Store, thread_id: str, expected: int, texts: list[str], r: RunRecord | None = None) -> None:
    await store.checkpoint(
        Checkpoint(
            thread_id=thread_id,
            expected_message_count=expected,
            messages=msgs(*texts),
            run=r or run(thread_id=thread_id),
        )
    )


def rich_message() -> Message:
    return Message(
        role="assistant",
        content=(
            TextBlock(text='héllo ✓ \u0000 "q"'),
            ImageBlock(data="aGk=", mime_type="image/png"),
            ResourceLinkBlock(uri="file:///a", name="a", size=3),
        ),
        tool_calls=(
            ToolCall(
                id="call_1", name="write_file", arguments={"path": "a.txt", "content": "x", "n": [1, 2.5, None, True]}
            ),
        ),
        thinking=(ThinkingBlock(text="hmm", signature="sig"), ThinkingBlock(text="", redacted=True)),
        id="msg-rich",
        run_id="run-1",
        internal=True,
        interrupted=True,
        created_at=42,
        metadata={"k": {"nested": ["v"]}},
    )


def rich_run() -> RunRecord:
    ticket = WaitingTicket(
        ticket_id="perm_call_1",
        tool_call_id="call_1",
        tool_name="write_file",
        arguments={"path": "a"},
        resume_mode="replay_tool_call",
        reason="tool:Permission",
        message="ok?",
        updated_at=7,
    )
    return run(
        status="waiting",
        parent_run_id="parent",
        session_id="sess",
        origin="acp",
        steps=3,
        usage=TokenUsage(input_tokens=10, output_tokens=20, cache_read_tokens=5),
        input_message_ids=["m1", "m2"],
        state=PersistedState(revision=4, extensions={"a": {"b": [1, 2]}}),
        waiting=WaitingState(reason="tool_permission", tickets=(ticket,), message="waiting for you"),
        termination=TerminationReason.stopped("max_rounds", "16"),
        status_reason="why",
        response="answer",
        error=None,
    )


# -- threads and checkpoints ---------------------------------------------------------------------------------


async def test_every_backend_implements_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)
    assert store.url.split(":", 1)[0] in ("memory", "file", "sqlite", "postgresql")


async def test_unknown_entries_read_as_absent(store: Store) -> None:
    assert await store.load_thread("nope") is None
    assert await store.load_messages("nope") == []
    assert await store.load_thread_state("nope") is None
    assert await store.latest_run("nope") is None
    assert await store.load_run("nope") is None
    assert await store.load_session("nope") is None
    assert await store.get_profile("agent:x", "nope") is None
    assert (await store.list_threads()).items == []
    assert (await store.list_runs()).items == []
    assert (await store.list_sessions()).items == []
    assert await store.list_grants("/w") == []
    assert await store.list_profile("agent:x") == []


async def test_checkpoint_round_trips_every_field(store: Store) -> None:
    m, r, state = (
        rich_message(),
        rich_run(),
        PersistedState(revision=9, extensions={"__runtime.tool_call_states": {"c": {"s": 1}}}),
    )
    await store.checkpoint(
        Checkpoint(
            thread_id="t1", expected_message_count=0, messages=[Message.user("hi"), m], run=r, thread_state=state
        )
    )
    loaded = await store.load_thread("t1")
    assert loaded is not None
    assert loaded.messages[1] == m
    assert loaded.messages[0].text == "hi"
    assert loaded.state == state
    assert loaded.latest_run == r
    assert loaded.thread.thread_id == "t1"
    assert loaded.thread.agent_id == "coder"
    assert loaded.thread.message_count == 2
    assert await store.load_run("run-1") == r
    assert await store.load_thread_state("t1") == state


async def test_checkpoints_append_in_order_and_page(store: Store) -> None:
    await commit(store, "t1", 0, ["a", "b"])
    await commit(store, "t1", 2, ["c"])
    await commit(store, "t1", 3, [])  # a checkpoint without messages still updates the run
    await commit(store, "t1", 3, ["d", "e", "f"])
    assert [m.text for m in await store.load_messages("t1")] == list("abcdef")
    assert [m.text for m in await store.load_messages("t1", offset=2, limit=3)] == ["c", "d", "e"]
    assert [m.text for m in await store.load_messages("t1", offset=4)] == ["e", "f"]
    assert await store.load_messages("t1", offset=10) == []
    assert await store.load_messages("t1", limit=0) == []
    loaded = await store.load_thread("t1")
    assert loaded is not None and loaded.thread.message_count == 6


async def test_version_guard_rejects_and_writes_nothing(store: Store) -> None:
    await store.checkpoint(
        Checkpoint(
            thread_id="t1",
            expected_message_count=0,
            messages=msgs("a"),
            run=run(steps=1),
            thread_state=PersistedState(revision=1, extensions={"k": 1}),
        )
    )
    for expected in (0, 2):
        bad = Checkpoint(
            thread_id="t1",
            expected_message_count=expected,
            messages=msgs("x", "y"),
            run=run(steps=99, updated_at=5000),
            thread_state=PersistedState(revision=7, extensions={"k": 7}),
        )
        with pytest.raises(VersionConflict) as info:
            await store.checkpoint(bad)
        assert (info.value.expected, info.value.actual) == (expected, 1)
    loaded = await store.load_thread("t1")
    assert loaded is not None
    assert [m.text for m in loaded.messages] == ["a"]
    assert loaded.thread.message_count == 1
    assert loaded.state == PersistedState(revision=1, extensions={"k": 1})
    assert loaded.latest_run is not None and loaded.latest_run.steps == 1


async def test_version_guard_on_a_missing_thread(store: Store) -> None:
    with pytest.raises(VersionConflict):
        await commit(store, "t1", 3, ["a"])
    assert await store.load_thread("t1") is None
    assert await store.load_run("run-1") is None


async def test_checkpoint_refuses_a_run_of_another_thread(store: Store) -> None:
    with pytest.raises(ValueError, match="run-1 of thread other"):
        await store.checkpoint(
            Checkpoint(thread_id="t1", expected_message_count=0, messages=msgs("a"), run=run(thread_id="other"))
        )
    assert await store.load_thread("t1") is None


async def test_concurrent_checkpoints_with_the_same_count_one_wins(store: Store) -> None:
    outcomes: list[str] = []

    async def attempt(i: int) -> None:
        try:
            await commit(store, "t1", 0, [f"m{i}"], run(f"run-{i}"))
            outcomes.append("ok")
        except VersionConflict:
            outcomes.append("conflict")

    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(attempt, i)
    assert sorted(outcomes) == ["conflict", "conflict", "conflict", "ok"]
    assert len(await store.load_messages("t1")) == 1


async def test_thread_state_kept_unless_the_checkpoint_carries_one(store: Store) -> None:
    await store.checkpoint(
        Checkpoint(
            thread_id="t1",
            expected_message_count=0,
            messages=msgs("a"),
            run=run(),
            thread_state=PersistedState(revision=1, extensions={"k": "one"}),
        )
    )
    await commit(store, "t1", 1, ["b"])
    assert await store.load_thread_state("t1") == PersistedState(revision=1, extensions={"k": "one"})
    await store.checkpoint(
        Checkpoint(
            thread_id="t1",
            expected_message_count=2,
            messages=[],
            run=run(),
            thread_state=PersistedState(revision=2, extensions={"j": None}),
        )
    )
    assert await store.load_thread_state("t1") == PersistedState(revision=2, extensions={"j": None})


async def test_checkpoint_bumps_thread_updated_at(store: Store) -> None:
    await store.save_thread(ThreadRecord(thread_id="t1", title="x", created_at=1, updated_at=1))
    await commit(store, "t1", 0, ["a"])
    loaded = await store.load_thread("t1")
    assert loaded is not None
    assert loaded.thread.updated_at > 1
    assert loaded.thread.created_at == 1
    assert loaded.thread.title == "x"


async def test_save_thread_upserts_but_never_sets_the_message_count(store: Store) -> None:
    await store.save_thread(ThreadRecord(thread_id="t1", title="first", metadata={"a": 1}, message_count=50))
    loaded = await store.load_thread("t1")
    assert loaded is not None
    assert loaded.messages == [] and loaded.thread.message_count == 0 and loaded.state is None
    await commit(store, "t1", 0, ["a"])
    t = ThreadRecord(
        thread_id="t1",
        title="second",
        agent_id="a2",
        parent_thread_id="p",
        metadata={"b": [2]},
        created_at=5,
        updated_at=6,
    )
    await store.save_thread(t)
    loaded = await store.load_thread("t1")
    assert loaded is not None
    assert loaded.thread == ThreadRecord(
        thread_id="t1",
        title="second",
        agent_id="a2",
        parent_thread_id="p",
        message_count=1,
        metadata={"b": [2]},
        created_at=5,
        updated_at=6,
    )
    assert len(loaded.messages) == 1


async def test_thread_state_save_and_overwrite(store: Store) -> None:
    await store.save_thread_state("t1", PersistedState(revision=1, extensions={"a": 1}))
    await store.save_thread_state("t1", PersistedState(revision=2, extensions={"b": 2}))
    assert await store.load_thread_state("t1") == PersistedState(revision=2, extensions={"b": 2})
    loaded = await store.load_thread("t1")
    assert loaded is not None and loaded.state == PersistedState(revision=2, extensions={"b": 2})
    await commit(store, "t1", 0, ["a"])  # a thread created by its state takes checkpoints from count 0


async def test_delete_thread_removes_everything_of_it_and_is_idempotent(store: Store) -> None:
    await store.checkpoint(
        Checkpoint(
            thread_id="t1",
            expected_message_count=0,
            messages=msgs("a"),
            run=run("r1"),
            thread_state=PersistedState(revision=1, extensions={}),
        )
    )
    await commit(store, "t2", 0, ["b"], run("r2", "t2"))
    await store.delete_thread("t1")
    await store.delete_thread("t1")
    await store.delete_thread("never")
    assert await store.load_thread("t1") is None
    assert await store.load_messages("t1") == []
    assert await store.load_run("r1") is None
    assert await store.latest_run("t1") is None
    assert [r.run_id for r in (await store.list_runs()).items] == ["r2"]
    assert [t.thread_id for t in (await store.list_threads()).items] == ["t2"]
    await commit(store, "t1", 0, ["again"], run("r3"))  # the id can be reused from scratch
    assert [m.text for m in await store.load_messages("t1")] == ["again"]


async def test_list_threads_newest_first_with_pages(store: Store) -> None:
    for i in range(5):
        await store.save_thread(ThreadRecord(thread_id=f"t{i}", created_at=i, updated_at=100 + i // 2))
    first = await store.list_threads(limit=2)
    assert [t.thread_id for t in first.items] == ["t4", "t3"]
    second = await store.list_threads(limit=2, cursor=first.next_cursor)
    assert [t.thread_id for t in second.items] == ["t2", "t1"]
    third = await store.list_threads(limit=2, cursor=second.next_cursor)
    assert [t.thread_id for t in third.items] == ["t0"] and third.next_cursor is None


async def test_odd_ids_are_stored_verbatim(store: Store) -> None:
    for tid in ("../../etc", "a/b", ".", "", "thread::ü 🦀", "x" * 200):
        await commit(store, tid, 0, [tid], run(f"run-{tid}", tid))
        loaded = await store.load_thread(tid)
        assert loaded is not None and loaded.messages[0].text == tid
        assert (await store.load_run(f"run-{tid}")) is not None
    await store.set_profile("agent:../x", "../k", 1)
    assert (await store.get_profile("agent:../x", "../k")) is not None


async def test_a_durable_store_keeps_everything_across_opens(store_url: str) -> None:
    async with open_store(store_url) as s:
        durable = s.durable
        await s.checkpoint(
            Checkpoint(
                thread_id="t1",
                expected_message_count=0,
                messages=[rich_message()],
                run=rich_run(),
                thread_state=PersistedState(revision=3, extensions={"a": 1}),
            )
        )
        await s.set_profile("system", "k", [1])
        await s.save_session(SessionRecord(session_id="s1", thread_id="t1", cwd="/w"))
        await s.add_grant(PermissionGrant(grant_id="g1", workspace="/w", tool="read_file", behavior="allow"))
    async with open_store(store_url) as s:
        loaded = await s.load_thread("t1")
        assert durable == (store_url != "memory://")
        if not durable:  # nothing outlives the process: a run keeps no effect ledger there
            assert loaded is None
            return
        assert loaded is not None and loaded.messages == [rich_message()] and loaded.latest_run == rich_run()
        assert (await s.get_profile("system", "k")) is not None
        assert await s.load_session("s1") is not None
        assert len(await s.list_grants("/w")) == 1
        await s.checkpoint(Checkpoint(thread_id="t1", expected_message_count=1, messages=msgs("more"), run=rich_run()))


# -- runs ------------------------------------------------------------------------------------------------------


async def test_save_run_upserts_and_creates_its_thread(store: Store) -> None:
    await store.save_run(run(status="created"))
    await store.save_run(run(status="running", steps=2, updated_at=2000))
    loaded = await store.load_run("run-1")
    assert loaded is not None and loaded.status == "running" and loaded.steps == 2
    thread = await store.load_thread("t1")
    assert thread is not None and thread.messages == [] and thread.latest_run == loaded
    await commit(store, "t1", 0, ["a"])


async def test_latest_run_is_the_most_recently_updated(store: Store) -> None:
    await store.save_run(run("r-a", updated_at=300))
    await store.save_run(run("r-b", updated_at=100))
    await store.save_run(run("r-c", updated_at=300))  # tie: the larger id wins
    await store.save_run(run("r-d", "t2", updated_at=900))
    latest = await store.latest_run("t1")
    assert latest is not None and latest.run_id == "r-c"
    await store.save_run(run("r-b", updated_at=400))
    latest = await store.latest_run("t1")
    assert latest is not None and latest.run_id == "r-b"


async def test_list_runs_order_filters_and_pages(store: Store) -> None:
    statuses = ["created", "running", "waiting", "done"]
    for i in range(12):
        await store.save_run(run(f"r{i:02d}", f"t{i % 2}", updated_at=1000 + i // 3, status=statuses[i % 4]))
    everything = await store.list_runs()
    expected = sorted((f"r{i:02d}" for i in range(12)), key=lambda r: (1000 + int(r[1:]) // 3, r), reverse=True)
    assert [r.run_id for r in everything.items] == expected and everything.next_cursor is None

    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_runs(limit=5, cursor=cursor)
        seen += [r.run_id for r in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == expected

    t1 = await store.list_runs(thread_id="t1")
    assert [r.run_id for r in t1.items] == [r for r in expected if int(r[1:]) % 2 == 1]
    waiting = await store.list_runs(statuses=["waiting", "done"])
    assert {r.status for r in waiting.items} == {"waiting", "done"} and len(waiting.items) == 6
    both = await store.list_runs(thread_id="t0", statuses=["created"], limit=1)
    assert [r.run_id for r in both.items] == ["r08"]
    rest = await store.list_runs(thread_id="t0", statuses=["created"], limit=1, cursor=both.next_cursor)
    assert [r.run_id for r in rest.items] == ["r04"]
    assert (await store.list_runs(statuses=[])).items == []
    assert (await store.list_runs(thread_id="none")).items == []


async def test_bad_cursors_and_limits_raise_value_error(store: Store) -> None:
    for i in range(3):
        await store.save_run(run(f"r{i}", updated_at=i))
        await store.save_session(SessionRecord(session_id=f"s{i}", thread_id="t", cwd="/w", updated_at=i))
    runs_cursor = (await store.list_runs(limit=1)).next_cursor
    assert runs_cursor is not None
    for bad in ("garbage!", "", "e30", runs_cursor + "x"):
        with pytest.raises(ValueError, match="invalid runs cursor"):
            await store.list_runs(cursor=bad)
    with pytest.raises(ValueError, match="invalid sessions cursor"):
        await store.list_sessions(cursor=runs_cursor)
    with pytest.raises(ValueError, match="invalid threads cursor"):
        await store.list_threads(cursor=runs_cursor)
    with pytest.raises(ValueError, match="limit"):
        await store.list_runs(limit=0)


# -- profiles --------------------------------------------------------------------------------------------------


async def test_profile_entries(store: Store) -> None:
    await store.set_profile("agent:global", "locale", "en")
    first = await store.get_profile("agent:global", "locale")
    assert first is not None and first.key == "locale" and first.value == "en" and first.updated_at > 0
    await anyio.sleep(0.002)
    await store.set_profile("agent:global", "locale", {"lang": "fr", "n": [1, None, 2.5], "ok": True})
    second = await store.get_profile("agent:global", "locale")
    assert second is not None and second.value == {"lang": "fr", "n": [1, None, 2.5], "ok": True}
    assert second.updated_at > first.updated_at
    await store.set_profile("agent:global", "b", None)
    await store.set_profile("agent:global", "a", 3)
    await store.set_profile("agent:thread::t1", "locale", "de")
    assert [(e.key, e.value) for e in await store.list_profile("agent:global")] == [
        ("a", 3),
        ("b", None),
        ("locale", {"lang": "fr", "n": [1, None, 2.5], "ok": True}),
    ]
    null_entry = await store.get_profile("agent:global", "b")
    assert null_entry is not None and null_entry.value is None  # a stored null is not a missing entry
    await store.delete_profile("agent:global", "a")
    await store.delete_profile("agent:global", "a")
    await store.delete_profile("agent:nobody", "a")
    assert [e.key for e in await store.list_profile("agent:global")] == ["b", "locale"]
    await store.clear_profile_owner("agent:global")
    await store.clear_profile_owner("agent:global")
    assert await store.list_profile("agent:global") == []
    other = await store.get_profile("agent:thread::t1", "locale")
    assert other is not None and other.value == "de"


# -- sessions --------------------------------------------------------------------------------------------------


async def test_sessions(store: Store) -> None:
    s1 = SessionRecord(
        session_id="s1",
        thread_id="t1",
        cwd="/w/a",
        agent_id="coder",
        title="Title",
        mode="plan",
        model="main",
        additional_directories=["/extra"],
        mcp_servers=[{"name": "everything", "command": "npx"}],
        origin="acp",
        created_at=1,
        updated_at=10,
    )
    await store.save_session(s1)
    assert await store.load_session("s1") == s1
    await store.save_session(SessionRecord(session_id="s2", thread_id="t2", cwd="/w/b", updated_at=30))
    await store.save_session(SessionRecord(session_id="s3", thread_id="t3", cwd="/w/a", updated_at=20))
    assert [s.session_id for s in (await store.list_sessions()).items] == ["s2", "s3", "s1"]
    assert [s.session_id for s in (await store.list_sessions(cwd="/w/a")).items] == ["s3", "s1"]
    page = await store.list_sessions(cwd="/w/a", limit=1)
    assert [s.session_id for s in page.items] == ["s3"]
    page = await store.list_sessions(cwd="/w/a", limit=1, cursor=page.next_cursor)
    assert [s.session_id for s in page.items] == ["s1"] and page.next_cursor is None
    s1.title, s1.updated_at = "Renamed", 40
    await store.save_session(s1)
    loaded = await store.load_session("s1")
    assert loaded is not None and loaded.title == "Renamed"
    assert [s.session_id for s in (await store.list_sessions()).items] == ["s1", "s2", "s3"]
    await store.delete_session("s1")
    await store.delete_session("s1")
    assert await store.load_session("s1") is None
    assert [s.session_id for s in (await store.list_sessions(cwd="/w/a")).items] == ["s3"]


# -- permission grants -------------------------------------------------------------------------------------------


async def test_grants(store: Store) -> None:
    await store.add_grant(
        PermissionGrant(
            grant_id="g2", workspace="/w", tool="run_command", behavior="allow", pattern="git *", created_at=20
        )
    )
    await store.add_grant(
        PermissionGrant(
            grant_id="g1", workspace="/w", tool="write_file", behavior="deny", created_at=10, expires_at=100
        )
    )
    await store.add_grant(
        PermissionGrant(grant_id="g3", workspace="/other", tool="read_file", behavior="allow", created_at=5)
    )
    grants = await store.list_grants("/w", now=50)
    assert [g.grant_id for g in grants] == ["g1", "g2"]
    assert grants[1] == PermissionGrant(
        grant_id="g2",
        workspace="/w",
        tool="run_command",
        behavior="allow",
        pattern="git *",
        created_at=20,
        expires_at=None,
    )
    assert [g.grant_id for g in await store.list_grants("/w", now=100)] == ["g2"]  # expired at its expiry
    assert [g.grant_id for g in await store.list_grants("/w")] == ["g2"]  # now defaults to the clock
    await store.add_grant(
        PermissionGrant(
            grant_id="g2", workspace="/w", tool="run_command", behavior="deny", pattern="git *", created_at=20
        )
    )
    assert [g.behavior for g in await store.list_grants("/w", now=0)] == ["deny", "deny"]
    await store.delete_grant("g2")
    await store.delete_grant("g2")
    assert [g.grant_id for g in await store.list_grants("/w", now=0)] == ["g1"]


# -- ownership -------------------------------------------------------------------------------------------------


async def test_callers_cannot_edit_what_is_stored(store: Store) -> None:
    r, state = (
        run(input_message_ids=["m"], state=PersistedState(revision=1, extensions={"k": 1})),
        PersistedState(revision=1, extensions={"k": 1}),
    )
    await store.checkpoint(
        Checkpoint(thread_id="t1", expected_message_count=0, messages=msgs("a"), run=r, thread_state=state)
    )
    r.input_message_ids.append("x")
    assert r.state is not None
    r.state.extensions["k"] = 2
    state.extensions["k"] = 2
    loaded = await store.load_thread("t1")
    assert loaded is not None and loaded.latest_run is not None and loaded.state is not None
    assert loaded.latest_run.input_message_ids == ["m"]
    loaded.latest_run.input_message_ids.append("y")
    loaded.state.extensions["k"] = 3
    loaded.thread.metadata["x"] = 1
    loaded.messages.clear()
    again = await store.load_thread("t1")
    assert again is not None and again.latest_run is not None
    assert again.latest_run.input_message_ids == ["m"] and again.state == PersistedState(
        revision=1, extensions={"k": 1}
    )
    assert again.thread.metadata == {} and len(again.messages) == 1
    session = SessionRecord(session_id="s", thread_id="t1", cwd="/w", additional_directories=["/a"])
    await store.save_session(session)
    session.additional_directories.append("/b")
    loaded_session = await store.load_session("s")
    assert loaded_session is not None and loaded_session.additional_directories == ["/a"]
    value = {"list": [1]}
    await store.set_profile("o", "k", value)
    value["list"].append(2)
    entry = await store.get_profile("o", "k")
    assert entry is not None and entry.value == {"list": [1]}


async def test_a_closed_store_refuses_calls(store_url: str) -> None:
    s = await open_store(store_url)
    await s.aclose()
    await s.aclose()  # idempotent
    with pytest.raises(StoreUnavailable, match="closed"):
        await s.load_thread("t1")
    with pytest.raises(StoreUnavailable, match="closed"):
        await s.set_profile("o", "k", 1)

"""A session's client system prompt and a fork's copied thread, on every backend: the prompt round-trips with the
record (a record stored before the field existed reads as none), and ``Sessions.fork`` writes an independent thread
holding a copy of the source's messages, whole or up to one of them."""

from __future__ import annotations

import pytest

from awaken_stdio.app.sessions import Sessions
from awaken_stdio.contract.activation import SystemPrompt
from awaken_stdio.contract.inference import TokenUsage
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, RunRecord, SessionRecord, Store
from awaken_stdio.stores._codec import session_from_json

pytestmark = pytest.mark.anyio

PROMPT = {"mode": "override", "content": [{"type": "text", "text": "Be terse."}, {"type": "text", "text": "Cite."}]}


async def test_the_system_prompt_is_kept_with_the_session(store: Store) -> None:
    await store.save_session(SessionRecord(session_id="s1", thread_id="t1", cwd="/w", system_prompt=PROMPT))
    loaded = await store.load_session("s1")
    assert loaded is not None and loaded.system_prompt == PROMPT
    assert SystemPrompt.of(loaded.system_prompt) == SystemPrompt(mode="override", text="Be terse.\n\nCite.")
    assert SystemPrompt(mode="append", text="Cite.").apply("Own.") == "Own.\n\nCite."
    await store.save_session(SessionRecord(session_id="s2", thread_id="t2", cwd="/w"))
    plain = await store.load_session("s2")
    assert plain is not None and plain.system_prompt is None
    old = session_from_json({"session_id": "s3", "thread_id": "t3", "cwd": "/w"})  # a record from before the field
    assert old.system_prompt is None and SystemPrompt.of(old.system_prompt) is None


async def test_a_fork_copies_the_thread_and_is_independent(store: Store) -> None:
    messages = [Message.user("one"), Message.assistant("first"), Message.user("two"), Message.assistant("second")]
    run = RunRecord(run_id="r1", thread_id="t1", agent_id="coder", status="done", usage=TokenUsage())
    await store.checkpoint(Checkpoint(thread_id="t1", expected_message_count=0, messages=messages, run=run))
    source = SessionRecord(session_id="s1", thread_id="t1", cwd="/w", agent_id="coder", system_prompt=PROMPT)
    await store.save_session(source)
    sessions = Sessions(store=store)

    whole = SessionRecord(session_id="s2", thread_id="t2", cwd="/w", agent_id="coder", system_prompt=PROMPT)
    await sessions.fork(source, whole)
    assert [m.text for m in await store.load_messages("t2")] == ["one", "first", "two", "second"]
    stored = await store.load_session("s2")
    assert stored is not None and stored.system_prompt == PROMPT
    thread = await store.load_thread("t2")
    assert thread is not None and thread.thread.parent_thread_id == "t1"
    assert thread.latest_run is not None and thread.latest_run.status_reason == "forked from session s1"

    part = SessionRecord(session_id="s3", thread_id="t3", cwd="/w", agent_id="coder")
    await sessions.fork(source, part, up_to=messages[1].id)
    assert [m.text for m in await store.load_messages("t3")] == ["one", "first"]

    # independent: appending to the fork leaves the source as it was
    fork_run = RunRecord(run_id="r2", thread_id="t2", agent_id="coder", status="done", usage=TokenUsage())
    await store.checkpoint(
        Checkpoint(thread_id="t2", expected_message_count=4, messages=[Message.user("three")], run=fork_run)
    )
    assert len(await store.load_messages("t1")) == 4 and len(await store.load_messages("t2")) == 5

    with pytest.raises(LookupError):
        await sessions.fork(source, SessionRecord(session_id="s4", thread_id="t4", cwd="/w"), up_to="nope")
    assert await store.load_session("s4") is None

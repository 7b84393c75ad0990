"""Prompt turns end to end: streaming, tool calls, permissions, plans, usage, stop reasons, cancel, queueing."""

from __future__ import annotations

import anyio
import pytest
from acp import RequestError, text_block

pytestmark = pytest.mark.anyio

WRITE = {"name": "write_file", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}


async def test_text_turn_streams_chunks_with_stable_message_ids_usage_and_a_title(harness):
    harness.configure(
        [{"thinking": "let me think", "text": "Hello there, friend.", "chunk_chars": 5, "usage": {"input_tokens": 90}}]
    )
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "Say hello to me please") == "end_turn"
        updates = agent.updates(sid)
        chunks = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
        thoughts = [u for u in updates if u["sessionUpdate"] == "agent_thought_chunk"]
        assert "".join(c["content"]["text"] for c in chunks) == "Hello there, friend."
        assert len(chunks) > 1 and len({c["messageId"] for c in chunks + thoughts}) == 1
        assert "".join(t["content"]["text"] for t in thoughts) == "let me think"
        usage = next(u for u in updates if u["sessionUpdate"] == "usage_update")
        assert usage["used"] >= 90 and usage["size"] >= usage["used"]
        info = next(u for u in updates if u["sessionUpdate"] == "session_info_update")
        assert info["title"] == "Say hello to me please" and info["updatedAt"].endswith("Z")
        # the title is given once, after the first exchange
        harness_turns = agent.kinds(sid).count("session_info_update")
        assert harness_turns == 1


async def test_tool_turn_asks_permission_then_reports_the_edit_with_a_diff(harness):
    harness.configure([{"text": "Writing.", "tool_calls": [WRITE]}, {"text": "Done."}])
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "write hello") == "end_turn"
        assert (agent.workspace / "hello.py").read_text() == "print('hi')\n"
        [asked] = agent.client.permissions
        assert asked["kinds"] == ["allow_once", "allow_always", "reject_once", "reject_always"]
        updates = agent.updates(sid)
        call = next(u for u in updates if u["sessionUpdate"] == "tool_call")
        assert call["toolCallId"] == asked["tool_call_id"] and call["kind"] == "edit" and call["status"] == "pending"
        final = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]
        [done] = final
        [diff] = done["content"]
        assert diff == {
            "type": "diff",
            "path": str(agent.workspace / "hello.py"),
            "oldText": None,
            "newText": "print('hi')\n",
        }
        assert done["locations"] == [{"path": str(agent.workspace / "hello.py")}]
        assert done["rawOutput"]["created"] is True
        ready = next(u for u in updates if u["sessionUpdate"] == "tool_call_update" and "rawInput" in u)
        assert ready["rawInput"] == WRITE["arguments"] and ready["title"] == "Write file hello.py"
        # the permission request comes after the tool call was announced, the result after the answer
        kinds = agent.kinds(sid)
        assert kinds.index("tool_call") < kinds.index("agent_message_chunk", kinds.index("tool_call"))


async def test_rejected_call_fails_and_the_model_goes_on(harness):
    harness.configure([{"tool_calls": [WRITE]}, {"text": "Understood, not writing."}])
    async with harness.spawn() as agent:
        agent.client.answers = ["reject_once"]
        sid = await agent.new_session()
        assert await agent.prompt(sid, "write hello") == "end_turn"
        assert not (agent.workspace / "hello.py").exists()
        failed = [u for u in agent.updates(sid) if u.get("status") == "failed"]
        assert len(failed) == 1 and failed[0]["content"][0]["content"]["text"].startswith("Rejected")


async def test_cancelled_permission_cancels_the_turn_and_the_session_stays_usable(harness):
    harness.configure([{"tool_calls": [WRITE]}, {"text": "Fine."}])
    async with harness.spawn() as agent:
        agent.client.answers = ["cancelled"]
        sid = await agent.new_session()
        assert await agent.prompt(sid, "write hello") == "cancelled"
        assert not (agent.workspace / "hello.py").exists()
        assert await agent.prompt(sid, "never mind") == "end_turn"


async def test_allow_always_is_remembered_across_processes(harness):
    harness.configure([{"tool_calls": [WRITE]}, {"text": "Done."}])
    async with harness.spawn() as agent:
        agent.client.answers = ["allow_always"]
        sid = await agent.new_session()
        assert await agent.prompt(sid, "write hello") == "end_turn"
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "write it again") == "end_turn"
        assert agent.client.permissions == []


async def test_plan_updates_come_from_update_plan(harness):
    entries = [{"content": "Read", "status": "completed"}, {"content": "Write", "status": "in_progress"}]
    harness.configure([{"tool_calls": [{"name": "update_plan", "arguments": {"entries": entries}}]}, {"text": "ok"}])
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "plan it") == "end_turn"
        [plan] = [u for u in agent.updates(sid) if u["sessionUpdate"] == "plan"]
        assert plan["entries"] == [
            {"content": "Read", "priority": "medium", "status": "completed"},
            {"content": "Write", "priority": "medium", "status": "in_progress"},
        ]
        assert agent.client.permissions == []  # read-only: no question


@pytest.mark.parametrize(
    ("turn", "agent_toml", "expected"),
    [
        ({"text": "cut", "stop_reason": "max_tokens"}, "", "max_tokens"),
        ({"text": "no", "stop_reason": "refusal"}, "", "refusal"),
        ({"tool_calls": [{"name": "list_directory", "arguments": {}}]}, "max_rounds = 1", "max_turn_requests"),
    ],
)
async def test_stop_reasons(harness, turn, agent_toml, expected):
    harness.configure([turn, {"text": "more"}], agent=agent_toml)
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "go") == expected


async def test_a_model_failure_is_an_internal_error_with_details(harness):
    harness.configure([{"error": {"kind": "invalid_request", "message": "the model says no"}}])
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        with pytest.raises(RequestError) as raised:
            await agent.prompt(sid, "go")
        assert raised.value.code == -32603
        assert "the model says no" in raised.value.data["message"]


async def test_cancel_stops_the_model_promptly(harness):
    harness.configure([{"text": "slow", "delay_ms": 10_000}])
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.prompt, sid, "slow")
            await anyio.sleep(0.3)
            started = anyio.current_time()
            await agent.conn.cancel(session_id=sid)
        assert anyio.current_time() - started < 2


async def test_cancel_stops_a_command_and_nothing_follows_the_answer(harness):
    turn = {"text": "working", "tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 10"}}]}
    harness.configure([turn, {"text": "quick answer"}], agent='[agents.coder.permission]\ndefault = "allow"')
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        async with anyio.create_task_group() as tg:
            result: list[str] = []

            async def run() -> None:
                result.append(await agent.prompt(sid, "slow"))

            tg.start_soon(run)
            await anyio.sleep(0.3)
            started = anyio.current_time()
            await agent.conn.cancel(session_id=sid)
        assert result == ["cancelled"] and anyio.current_time() - started < 2
        answered = len(agent.wire.incoming())
        await anyio.sleep(0.3)
        assert len(agent.wire.incoming()) == answered  # no update of the cancelled turn after its answer
        assert await agent.prompt(sid, "again") == "end_turn"
        texts = [u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
        assert texts == ["working", "quick answer"]


async def test_a_second_prompt_waits_for_the_first(harness):
    harness.configure([{"text": "first", "delay_ms": 300}, {"text": "second"}])
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        order: list[str] = []

        async def run(text: str) -> None:
            with anyio.fail_after(20):
                await agent.conn.prompt(session_id=sid, prompt=[text_block(text)])
            order.append(text)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "one")
            await anyio.sleep(0.05)
            tg.start_soon(run, "two")
        assert order == ["one", "two"]
        texts = [u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
        assert texts == ["first", "second"]


async def test_editor_file_system_and_terminal_are_used_only_when_advertised(harness):
    turns = [
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "notes.txt"}},
                {"name": "write_file", "arguments": {"path": "out.txt", "content": "x"}},
                {"name": "run_command", "arguments": {"command": "echo from-terminal"}},
            ]
        },
        {"text": "done"},
    ]
    harness.configure(turns, agent='[agents.coder.permission]\ndefault = "allow"')
    (harness.workspace / "notes.txt").write_text("on disk\n")
    async with harness.spawn(fs=True, terminal=True) as agent:
        agent.client.files[str(agent.workspace / "notes.txt")] = "unsaved buffer\n"
        sid = await agent.new_session()
        assert await agent.prompt(sid, "go") == "end_turn"
        assert {"fs/read_text_file", "fs/write_text_file", "terminal/create", "terminal/release"} <= set(
            agent.client.calls
        )
        assert agent.client.files[str(agent.workspace / "out.txt")] == "x"
        assert not (agent.workspace / "out.txt").exists()  # the editor wrote it (into its buffer)
        done = [u for u in agent.updates(sid) if u.get("status") == "completed"]
        assert "unsaved buffer" in str(done[0]["rawOutput"])
        assert any(c.get("type") == "terminal" for u in done for c in u.get("content", []))
    async with harness.spawn() as agent:  # nothing advertised: nothing called, all local
        sid = await agent.new_session()
        assert await agent.prompt(sid, "go") == "end_turn"
        assert agent.client.calls == []
        assert (agent.workspace / "out.txt").read_text() == "x"


async def test_additional_directories_widen_the_workspace(harness, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    calls = [
        {"name": "write_file", "arguments": {"path": str(extra / "a.txt"), "content": "in"}},
        {"name": "write_file", "arguments": {"path": str(outside / "b.txt"), "content": "out"}},
    ]
    harness.configure([{"tool_calls": calls}, {"text": "ok"}], agent='[agents.coder.permission]\ndefault = "allow"')
    async with harness.spawn() as agent:
        sid = await agent.new_session(additional_directories=[str(extra)])
        assert await agent.prompt(sid, "go") == "end_turn"
        assert (extra / "a.txt").read_text() == "in"
        assert not (outside / "b.txt").exists()


async def test_a_fatal_tool_error_ends_the_turn_with_the_error(harness):
    harness.configure(
        [{"tool_calls": [{"name": "explode", "arguments": {}}]}, {"text": "never said"}],
        agent='[agents.coder.permission]\ndefault = "allow"\n[tools]\nmodules = ["tests.protocols.acp.fatal_tools"]',
    )
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        with pytest.raises(RequestError) as raised:
            await agent.prompt(sid, "go")
        assert raised.value.code == -32603 and "the disk is on fire" in raised.value.data["message"]
        texts = [u for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
        assert texts == []  # the model was not called again

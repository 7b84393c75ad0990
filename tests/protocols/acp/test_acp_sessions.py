"""Sessions end to end: initialize, auth, new/load/resume/list/close/delete, modes, config options, commands,
MCP servers, and approvals that survive a kill -9."""

from __future__ import annotations

import anyio
import pytest
from acp import RequestError

from .conftest import clean_env

pytestmark = pytest.mark.anyio

WRITE = {"name": "write_file", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}


async def test_initialize_answers_version_1_whatever_is_asked(harness):
    harness.configure([{"text": "hi"}])
    async with harness.spawn(initialize=False) as agent:
        for asked in (1, 2, 65535):
            init = await agent.conn.initialize(protocol_version=asked)
            assert init.protocol_version == 1
        caps = init.agent_capabilities
        assert caps.load_session and caps.mcp_capabilities.http and caps.prompt_capabilities.embedded_context
        sessions = caps.session_capabilities
        assert sessions.list is not None and sessions.resume is not None and sessions.close is not None
        assert init.agent_info.name == "awaken-stdio"
        assert [m.id for m in init.auth_methods] == ["configure-model"]  # always one: the ACP registry requires it


async def test_without_a_model_session_new_asks_for_one_until_authenticate_finds_it(harness):
    config = harness.dir / "config.toml"
    config.write_text("")
    harness.config = config
    async with harness.spawn(env=clean_env()) as agent:
        [method] = agent.init.auth_methods
        with pytest.raises(RequestError) as raised:
            await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[])
        # the file exists, so the environment's keys do not apply: the message says what to add to it
        assert raised.value.code == -32000 and "add [models.<id>] to" in str(raised.value)
        with pytest.raises(RequestError):
            await agent.conn.authenticate(method_id=method.id)
        harness.configure([{"text": "configured now"}])  # the same file, now with a model
        await agent.conn.authenticate(method_id=method.id)
        sid = await agent.new_session()
        assert await agent.prompt(sid, "hi") == "end_turn"


async def test_new_session_checks_cwd_and_returns_modes_and_config_options(harness):
    harness.configure([{"text": "hi"}], models='[models.other]\nprovider = "scripted"\nscript = "script.json"')
    async with harness.spawn() as agent:
        with pytest.raises(RequestError) as raised:
            await agent.conn.new_session(cwd="relative/dir", mcp_servers=[])
        assert raised.value.code == -32602
        response = await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[])
        assert response.modes.current_mode_id == "default"
        assert [m.id for m in response.modes.available_modes] == ["default", "accept_edits", "plan", "bypass"]
        options = {o.id: o for o in response.config_options}
        assert set(options) == {"mode", "model"}  # no boolean option: the client did not advertise them
        assert [o.value for o in options["model"].options] == ["main", "other"]
        await anyio.sleep(0.1)
        before, after = agent.wire.around_answer("session/new", 1)
        assert before == []  # available commands follow the answer
        update = after[0]["params"]["update"]
        assert {c["name"] for c in update["availableCommands"]} >= {"compact", "mode", "model", "runs"}


async def test_modes_and_config_options(harness):
    harness.configure([{"text": "hi"}], models='[models.other]\nprovider = "scripted"\nscript = "script.json"')
    async with harness.spawn(boolean_config=True) as agent:
        response = await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[])
        sid = response.session_id
        assert {o.id for o in response.config_options} == {"mode", "model", "show_thoughts"}
        await agent.conn.set_session_mode(session_id=sid, mode_id="plan")
        assert {"sessionUpdate": "current_mode_update", "currentModeId": "plan"} in agent.updates(sid)
        changed = await agent.conn.set_config_option(config_id="model", session_id=sid, value="other")
        values = {o.id: o.current_value for o in changed.config_options}
        assert values == {"mode": "plan", "model": "other", "show_thoughts": True}
        changed = await agent.conn.set_config_option(config_id="show_thoughts", session_id=sid, value=False)
        assert {o.id: o.current_value for o in changed.config_options}["show_thoughts"] is False
        with pytest.raises(RequestError) as raised:
            await agent.conn.set_config_option(config_id="mode", session_id=sid, value="yolo")
        assert raised.value.code == -32602
        assert await agent.prompt(sid, "hi") == "end_turn"  # runs on the copy of the agent on model "other"


async def test_slash_commands(harness):
    harness.configure([{"text": "hi"}])
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "/mode accept_edits") == "end_turn"
        assert {"sessionUpdate": "current_mode_update", "currentModeId": "accept_edits"} in agent.updates(sid)
        for command in ("/runs", "/compact", "/model"):
            assert await agent.prompt(sid, command) == "end_turn"
        texts = [u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
        assert texts[1] == "No runs yet in this session."
        assert texts[2] == "Nothing was compacted: the conversation is empty." and "main" in texts[3]


async def test_sessions_outlive_the_process_list_load_replays_resume_does_not(harness):
    entries = [{"content": "Write it", "status": "completed"}]
    turns = [
        {"thinking": "a file", "text": "Writing.", "tool_calls": [WRITE]},
        {"tool_calls": [{"name": "update_plan", "arguments": {"entries": entries}}]},
        {"text": "Done."},
    ]
    harness.configure(turns)
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "write hello") == "end_turn"
        live = agent.updates(sid)
        other = await agent.new_session()
    live_ids = {u["messageId"] for u in live if u["sessionUpdate"] == "agent_message_chunk"}
    async with harness.spawn() as agent:
        listed = await agent.conn.list_sessions(cwd=str(agent.workspace))
        assert [s.session_id for s in listed.sessions] == [sid, other] or {s.session_id for s in listed.sessions} == {
            sid,
            other,
        }
        info = next(s for s in listed.sessions if s.session_id == sid)
        assert info.title == "write hello" and info.updated_at.endswith("Z") and info.cwd == str(agent.workspace)
        assert (await agent.conn.list_sessions(cwd="/nowhere")).sessions == []

        seen = len(agent.wire.incoming())
        await agent.conn.load_session(cwd=str(agent.workspace), session_id=sid, mcp_servers=[])
        await anyio.sleep(0.1)
        before, after = agent.wire.around_answer("session/load", seen)
        before = [m["params"]["update"] for m in before]
        after = [m["params"]["update"]["sessionUpdate"] for m in after]
        kinds = [u["sessionUpdate"] for u in before]
        assert kinds[:4] == ["user_message_chunk", "agent_thought_chunk", "agent_message_chunk", "tool_call"]
        assert {"tool_call_update", "plan"} <= set(kinds) and after == []  # ACP-LOAD-002: all before the answer
        described = ["available_commands_update", "current_mode_update", "config_option_update", "session_info_update"]
        assert kinds[-4:] == described and before[-1]["title"] == "write hello"
        assert next(u for u in before if u["sessionUpdate"] == "tool_call_update")["status"] == "completed"
        assert {u["messageId"] for u in before if u["sessionUpdate"] == "agent_message_chunk"} == live_ids

        seen = len(agent.wire.incoming())
        await agent.conn.resume_session(cwd=str(agent.workspace), session_id=other, mcp_servers=[])
        await anyio.sleep(0.1)
        before, after = agent.wire.around_answer("session/resume", seen)
        kinds = [m["params"]["update"]["sessionUpdate"] for m in before]
        assert kinds[:3] == described[:3] and after == []  # no replay on resume, the rest before the answer

        with pytest.raises(RequestError) as raised:
            await agent.conn.load_session(cwd=str(agent.workspace), session_id="sess_nope", mcp_servers=[])
        assert raised.value.code == -32002


async def test_list_pages_close_and_delete(harness):
    harness.configure([{"text": "slow", "delay_ms": 10_000}])
    async with harness.spawn() as agent:
        ids = [await agent.new_session() for _ in range(52)]
        first = await agent.conn.list_sessions()
        assert len(first.sessions) == 50 and first.next_cursor
        rest = await agent.conn.list_sessions(cursor=first.next_cursor)
        assert {s.session_id for s in first.sessions + rest.sessions} == set(ids) and rest.next_cursor is None
        with pytest.raises(RequestError):
            await agent.conn.list_sessions(cursor="bogus")

        result: list[str] = []

        async def busy() -> None:
            result.append(await agent.prompt(ids[0], "slow"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(busy)
            await anyio.sleep(0.3)
            await agent.conn.close_session(session_id=ids[0])
        assert result == ["cancelled"]
        await agent.conn.close_session(session_id=ids[1])  # idle
        assert await agent.raw("session/delete", {"sessionId": ids[2]}) == {}
        assert await agent.raw("session/delete", {"sessionId": "sess_unknown"}) == {}
        listed = (await agent.conn.list_sessions()).sessions + (await agent.conn.list_sessions(cursor=None)).sessions
        assert ids[2] not in {s.session_id for s in listed}


async def test_mcp_servers_failing_is_reported_not_fatal_and_sse_is_refused(harness):
    from acp.schema import McpServerStdio, SseMcpServer

    harness.configure([{"text": "hi"}])
    async with harness.spawn() as agent:
        broken = McpServerStdio(name="broken", command="/nonexistent/server", args=[], env=[])
        response = await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[broken])
        [status] = response.field_meta["awaken-stdio"]["mcpServers"]
        assert status["name"] == "broken" and status["state"] == "failed"
        assert await agent.prompt(response.session_id, "hi") == "end_turn"
        sse = SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[])
        with pytest.raises(RequestError) as raised:
            await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[sse])
        assert raised.value.code == -32602


async def test_a_pending_approval_survives_kill_9_and_is_offered_again_before_the_next_prompt(harness):
    harness.configure([{"tool_calls": [WRITE]}, {"text": "Written."}, {"text": "And now your new question."}])
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        await agent.killed_while_asked(sid, "write hello")
        [first] = agent.client.permissions
    assert not (harness.workspace / "hello.py").exists()
    async with harness.spawn() as agent:
        await agent.conn.load_session(cwd=str(agent.workspace), session_id=sid, mcp_servers=[])
        assert await agent.prompt(sid, "are you there?") == "end_turn"
        [again] = agent.client.permissions
        assert again["tool_call_id"] == first["tool_call_id"]
        assert (agent.workspace / "hello.py").read_text() == "print('hi')\n"
        texts = [u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
        assert texts[-2:] == ["Written.", "And now your new question."]
        assert await agent.prompt(sid, "/runs") == "end_turn"
        runs = agent.updates(sid)[-1]["content"]["text"]
        assert "waiting" not in runs and runs.count("completed") == 2  # resumed once, then the new prompt

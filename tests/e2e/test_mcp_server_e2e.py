"""``awaken-stdio mcp`` end to end over real pipes, driven by the ``mcp`` SDK ``Client`` in both eras.

``legacy`` forces the initialize handshake; ``auto`` probes ``server/discover`` and takes the 2026-07-28 era. Every
message the server writes is checked against the pinned ``mcp_types`` models when a connection ends (support.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from awaken_stdio.contract.stores import SessionRecord
from awaken_stdio.stores import open_store
from awaken_stdio.tools.schema import check_portable
from tests.protocols.mcp.support import Env, connect, make_env, turn

pytestmark = [pytest.mark.anyio]
MODES = ["legacy", "auto"]
MARK = {"name": "mark", "arguments": {"label": "one"}}


def mark_agent(tmp_path: Path, **kwargs: Any) -> Env:
    return make_env(tmp_path, [turn("Marking.", MARK), turn("Done.")], **kwargs)


async def runs(env: Env) -> list[Any]:
    async with open_store(env.store) as store:
        return (await store.list_runs()).items


@pytest.mark.parametrize("mode", MODES)
async def test_listing(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    async with connect(env, mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        tools = (await client.list_tools()).tools
    names = [t.name for t in tools]
    assert names == sorted(names)
    assert {"agent_helper", "resume_run", "add", "mark", "read_file"} <= set(names)
    assert "agent_quiet" not in names  # not expose_mcp
    for t in tools:
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", t.name)
        assert check_portable(t.input_schema) == [], t.name
        assert t.title
    by_name = {t.name: t for t in tools}
    for name in ("agent_helper", "resume_run"):
        assert by_name[name].output_schema is not None and by_name[name].output_schema["type"] == "object"
    assert by_name["agent_helper"].annotations.open_world_hint is True
    assert by_name["read_file"].annotations.read_only_hint is True
    assert by_name["write_file"].annotations.read_only_hint is False
    assert by_name["add"].output_schema == {"type": "object", "properties": {"sum": {"type": "integer"}},
                                            "required": ["sum"]}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
async def test_calls(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    async with connect(env, mode) as client:
        await client.list_tools()
        result = await client.call_tool("add", {"a": 1, "b": 2})
        assert result.structured_content == {"sum": 3} and not result.is_error
        assert result.content[0].text == '{"sum": 3}'  # the text twin
        bad = await client.call_tool("add", {"a": "one", "b": 2})
        assert bad.is_error and "a" in bad.content[0].text and "integer" in bad.content[0].text
        missing = await client.call_tool("echo", {})
        assert missing.is_error and "'text' is a required property" in missing.content[0].text
        raised = await client.call_tool("explode", {"message": "kaboom"})
        assert raised.is_error and "kaboom" in raised.content[0].text
        huge = await client.call_tool("big", {"size": 300_000})
        assert "[truncated: showing 100000 of 300000 characters" in huge.content[0].text
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope", {})
        assert unknown.value.error.code == -32602 and "Unknown tool: nope" in unknown.value.error.message
        (env.cwd / "hello.txt").write_text("hi there")
        read = await client.call_tool("read_file", {"path": "hello.txt"})  # --cwd is the tools' directory
        assert "hi there" in read.content[0].text
        past = await client.call_tool("read_file", {"path": "hello.txt", "line": 9})  # the tool's own refusal
        assert past.is_error and past.content[0].text == (
            "Invalid arguments: line 9 is past the end of hello.txt, which has 1 line"  # said once
        )


@pytest.mark.parametrize("mode", MODES)
async def test_agent_tool_progress_and_session(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path, [turn("Echoing.", {"name": "echo", "arguments": {"text": "x"}}), turn("First answer."),
                              turn("Second answer.")])  # fmt: skip
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with connect(env, mode) as client:
        await client.list_tools()
        first = await client.call_tool("agent_helper", {"message": "go"}, progress_callback=on_progress)
        count = len(progress)
        assert first.structured_content["status"] == "completed"
        assert first.structured_content["response"] == "First answer."
        assert first.content[0].text == "First answer."
        thread = first.structured_content["thread_id"]
        second = await client.call_tool("agent_helper", {"message": "again", "session_id": thread})
        assert second.structured_content["thread_id"] == thread
        assert second.structured_content["response"] == "Second answer."
        unknown = await client.call_tool("agent_helper", {"message": "x", "session_id": "nope"})
        assert unknown.is_error and "Unknown session_id" in unknown.content[0].text
    values = [v for v, _ in progress]
    assert values == sorted(set(values)) and len(values) >= 4
    messages = " | ".join(m or "" for _, m in progress)
    assert "started" in messages and "step" in messages and "calling echo" in messages
    assert len(progress) == count  # nothing after the response


@pytest.mark.parametrize("mode", MODES)
async def test_cancel_stops_the_run(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path, [turn("never", delay_ms=30_000)])
    async with connect(env, mode) as client:
        await client.list_tools()
        with anyio.move_on_after(1.0):
            await client.call_tool("agent_helper", {"message": "slow"})
        with anyio.fail_after(2):
            assert (await client.call_tool("echo", {"text": "alive"})).content[0].text == "alive"
        with anyio.fail_after(5):
            while not [r for r in await runs(env) if r.display_status == "cancelled"]:
                await anyio.sleep(0.05)


@pytest.mark.parametrize("mode", MODES)
async def test_long_call_does_not_block_others(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    async with connect(env, mode) as client:
        await client.list_tools()
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "nap", {"seconds": 2})
            await anyio.sleep(0.2)
            with anyio.fail_after(0.5):
                await client.list_tools(cache_mode="refresh") if mode == "auto" else await client.list_tools()
                await client.call_tool("echo", {"text": "x"})


def answer(action: str, decision: str = "allow_once") -> Any:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert params.requested_schema["properties"]["decision"]["enum"][0] == "allow_once"
        return types.ElicitResult(action=action, content={"decision": decision} if action == "accept" else None)

    return elicit


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("action", "decision", "marks"), [
    ("accept", "allow_once", ["one"]), ("accept", "reject_once", []), ("decline", "", []), ("cancel", "", []),
])  # fmt: skip
async def test_elicitation(tmp_path: Path, mode: str, action: str, decision: str, marks: list[str]) -> None:
    env = mark_agent(tmp_path)
    async with connect(env, mode, elicitation_callback=answer(action, decision)) as client:
        await client.list_tools()
        result = await client.call_tool("agent_helper", {"message": "mark it"})
    assert result.structured_content["status"] == "completed", result
    assert result.structured_content["response"] == "Done."
    assert env.marks == marks


async def test_tampered_request_state(tmp_path: Path) -> None:
    env = mark_agent(tmp_path)
    async with connect(env, "auto", elicitation_callback=answer("accept")) as client:
        await client.list_tools()
        first = await client.session.call_tool("agent_helper", {"message": "mark"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        responses = {key: {"action": "accept", "content": {"decision": "allow_once"}} for key in first.input_requests}
        for forged in (first.request_state[:-2] + "AA", "x.y", first.request_state + "."):
            with pytest.raises(MCPError) as bad:
                await client.session.call_tool("agent_helper", {"message": "mark"}, input_responses=responses,
                                               request_state=forged, allow_input_required=True)  # fmt: skip
            assert bad.value.error.code == -32602 and "requestState" in bad.value.error.message
        with pytest.raises(MCPError):  # sealed for other arguments
            await client.session.call_tool("agent_helper", {"message": "other"}, input_responses=responses,
                                           request_state=first.request_state, allow_input_required=True)  # fmt: skip
        done = await client.session.call_tool("agent_helper", {"message": "mark"}, input_responses=responses,
                                              request_state=first.request_state, allow_input_required=True)  # fmt: skip
        assert done.structured_content["status"] == "completed"
    assert env.marks == ["one"]


@pytest.mark.parametrize("mode", MODES)
async def test_waiting_then_resume_run(tmp_path: Path, mode: str) -> None:
    env = mark_agent(tmp_path)
    async with connect(env, mode) as client:  # no elicitation: the run waits
        await client.list_tools()
        waiting = await client.call_tool("agent_helper", {"message": "mark it"})
        data = waiting.structured_content
        assert data["status"] == "waiting" and data["pending"][0]["tool"] == "mark"
        assert "resume_run" in waiting.content[0].text
        call_id = data["pending"][0]["tool_call_id"]
        wrong = await client.call_tool("resume_run", {"run_id": data["run_id"], "decisions": [
            {"tool_call_id": "nope", "approve": True}]})  # fmt: skip
        assert wrong.is_error and call_id in wrong.content[0].text
        done = await client.call_tool("resume_run", {"run_id": data["run_id"], "decisions": [
            {"tool_call_id": call_id, "approve": True}]})  # fmt: skip
        assert done.structured_content["status"] == "completed" and done.structured_content["response"] == "Done."
        again = await client.call_tool("resume_run", {"run_id": data["run_id"], "decisions": [
            {"tool_call_id": call_id, "approve": True}]})  # fmt: skip
        assert again.is_error and "already decided from mcp by process" in again.content[0].text
        assert "completed" in again.content[0].text
        unknown = await client.call_tool("resume_run", {"run_id": "nope", "decisions": [
            {"tool_call_id": call_id, "approve": True}]})  # fmt: skip
        assert unknown.is_error and "runs list" in unknown.content[0].text
    assert env.marks == ["one"]


@pytest.mark.parametrize("mode", MODES)
async def test_session_id_continues_an_acp_session(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    async with open_store(env.store) as store:
        await store.save_session(
            SessionRecord(session_id="acp-session-1", thread_id="acp-thread-1", cwd=str(env.cwd), agent_id="helper")
        )
    async with connect(env, mode) as client:
        await client.list_tools()
        result = await client.call_tool("agent_helper", {"message": "hello", "session_id": "acp-session-1"})
    assert result.structured_content["thread_id"] == "acp-thread-1"
    (run,) = await runs(env)
    assert (run.thread_id, run.session_id, run.origin) == ("acp-thread-1", "acp-session-1", "mcp")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("action", "decision", "marks"), [("accept", "allow_once", ["d"]), ("decline", "", [])])
async def test_direct_call_permission_ask(tmp_path: Path, mode: str, action: str, decision: str, marks: list) -> None:
    env = make_env(tmp_path, mcp_permission="ask")
    async with connect(env, mode, elicitation_callback=answer(action, decision)) as client:
        await client.list_tools()
        assert (await client.call_tool("echo", {"text": "read-only tools just run"})).is_error is False
        result = await client.call_tool("mark", {"label": "d"})
        assert result.is_error is (not marks)
    assert env.marks == marks


async def test_direct_call_permission_ask_without_elicitation(tmp_path: Path) -> None:
    env = make_env(tmp_path, mcp_permission="ask")
    async with connect(env, "legacy") as client:
        result = await client.call_tool("mark", {"label": "d"})
    assert result.is_error and "permission" in result.content[0].text and env.marks == []


@pytest.mark.parametrize("mode", MODES)
async def test_run_events_as_log_messages(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    extra = {"log_level": "info"} if mode == "auto" else {}
    async with connect(env, mode, logging_callback=on_log, **extra) as client:
        if mode == "legacy":
            with pytest.warns(MCPDeprecationWarning):
                await client.set_logging_level("info")
        await client.call_tool("agent_helper", {"message": "hi"})
    texts = [str(p.data) for p in logs]
    assert any("started" in t for t in texts) and any("completed" in t for t in texts)
    assert all(p.level == "info" for p in logs)

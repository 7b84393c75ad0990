"""The v2 prompt lifecycle over the real process: the receipt, the accepted user message, ``state_update`` from
``running`` to ``idle`` with its stop reason, cancellation, v2 permission requests and tool-call, plan and terminal
updates keyed by their ids, replay from a message id, and the session methods in their v2 shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.protocols.acp.conftest import Harness
from tests.protocols.acp.v2.support import spawn_v2

pytestmark = pytest.mark.anyio


async def test_a_prompt_is_a_receipt_then_states_to_idle(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.configure([{"text": "Hello there.", "chunk_chars": 4}])
    async with spawn_v2(harness.command(), harness.workspace) as client:
        sid = await client.new_session(harness.workspace)
        message_id = await client.prompt(sid, "hi")
        assert await client.idle() == ("idle", "end_turn")
        kinds = [u["sessionUpdate"] for u in client.updates()]
        accepted = kinds.index("user_message")
        assert kinds[accepted + 1 :].count("state_update") == 2
        assert client.updates()[accepted]["messageId"] == message_id
        assert client.states() == [("running", None), ("idle", "end_turn")]
        chunks = [u for u in client.updates() if u["sessionUpdate"] == "agent_message_chunk"]
        assert "".join(c["content"]["text"] for c in chunks) == "Hello there."
        assert len({c["messageId"] for c in chunks}) == 1
        assert "tool_call" not in kinds and "current_mode_update" not in kinds


async def test_cancel_ends_idle_cancelled(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.configure([{"text": "slow", "delay_ms": 10_000}])
    async with spawn_v2(harness.command(), harness.workspace) as client:
        sid = await client.new_session(harness.workspace)
        await client.prompt(sid, "go")
        await client.wait_for(lambda m: m.get("params", {}).get("update", {}).get("state") == "running")
        await client.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        assert await client.idle(timeout=5) == ("idle", "cancelled")


async def test_a_failed_turn_ends_idle_error_after_saying_why(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.configure([{"error": {"kind": "invalid_request", "message": "the model says no"}}])
    async with spawn_v2(harness.command(), harness.workspace) as client:
        sid = await client.new_session(harness.workspace)
        await client.prompt(sid, "go")
        assert await client.idle() == ("idle", "_error")
        said = [u for u in client.updates() if u["sessionUpdate"] == "agent_message_chunk"]
        assert "the model says no" in said[-1]["content"]["text"]


async def test_an_edit_asks_with_a_title_and_a_tool_call_subject_with_its_diff(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    entries = [{"content": "Write", "status": "in_progress"}]
    write = {"id": "call_w", "name": "write_file", "arguments": {"path": "a.txt", "content": "hi\n"}}
    plan = {"id": "call_p", "name": "update_plan", "arguments": {"entries": entries}}
    harness.configure([{"tool_calls": [write]}, {"tool_calls": [plan]}, {"text": "Done."}])
    async with spawn_v2(harness.command(), harness.workspace) as client:
        sid = await client.new_session(harness.workspace)
        await client.prompt(sid, "write")
        assert await client.idle() == ("idle", "end_turn")
        [asked] = [m["params"] for m in client.incoming if m.get("method") == "session/request_permission"]
        path = str(harness.workspace / "a.txt")
        assert asked["title"].startswith("Allow ") and asked["subject"]["type"] == "tool_call"
        [diff] = asked["subject"]["toolCall"]["content"]
        assert diff["changes"] == [{"operation": "add", "path": path, "fileType": "text"}]
        assert "+hi" in diff["patch"]["text"]
        assert client.states() == [
            ("running", None),
            ("requires_action", None),
            ("running", None),
            ("idle", "end_turn"),
        ]
        [plan_update] = [u for u in client.updates() if u["sessionUpdate"] == "plan_update"]
        assert plan_update["plan"]["planId"] and plan_update["plan"]["entries"][0]["content"] == "Write"
        done = [u for u in client.updates() if u.get("toolCallId") == "call_w" and u.get("status") == "completed"]
        assert done and (harness.workspace / "a.txt").read_text() == "hi\n"


async def test_a_command_runs_in_a_display_only_terminal(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    run = {"id": "call_c", "name": "run_command", "arguments": {"command": "echo out"}}
    harness.configure([{"tool_calls": [run]}, {"text": "Done."}], agent='[agents.coder.permission]\ndefault = "allow"')
    async with spawn_v2(harness.command(), harness.workspace) as client:
        sid = await client.new_session(harness.workspace)
        await client.prompt(sid, "run")
        assert await client.idle() == ("idle", "end_turn")
        [terminal] = [u for u in client.updates() if u["sessionUpdate"] == "terminal_update"]
        assert terminal["command"] == "echo out" and terminal["output"]["data"] == "b3V0Cg=="  # "out\n"
        assert terminal["exitStatus"]["exitCode"] == 0
        [done] = [u for u in client.updates() if u.get("toolCallId") == "call_c" and u.get("status") == "completed"]
        assert done["content"] == [{"type": "terminal", "terminalId": terminal["terminalId"]}]


async def test_a_tools_form_is_asked_with_requires_action(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    tools = '[agents.coder.permission]\ndefault = "allow"\n[tools]\nmodules = ["tests.protocols.acp.asking_tools"]'
    harness.configure([{"tool_calls": [{"name": "ask_name", "arguments": {}}]}, {"text": "Done."}], agent=tools)
    async with spawn_v2(harness.command(), harness.workspace, initialize=False) as client:
        await client.initialize({"elicitation": {"form": {}}})
        client.form_answer = {"action": "accept", "content": {"name": "Ada"}}
        sid = await client.new_session(harness.workspace)
        await client.prompt(sid, "ask")
        assert await client.idle() == ("idle", "end_turn")
        [form] = [m["params"] for m in client.incoming if m.get("method") == "elicitation/create"]
        assert form["mode"] == "form" and form["sessionId"] == sid
        assert client.states() == [
            ("running", None),
            ("requires_action", None),
            ("running", None),
            ("idle", "end_turn"),
        ]
        results = [u for u in client.updates() if u.get("status") == "completed"]
        assert "accept: Ada" in str(results[-1])


async def test_an_unknown_permission_outcome_is_never_an_approval(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.configure([{"tool_calls": [{"id": "call_1", "name": "run_command", "arguments": {"command": "touch x"}}]}])
    async with spawn_v2(harness.command(), harness.workspace) as client:
        client.hold = True
        sid = await client.new_session(harness.workspace)
        await client.prompt(sid, "touch")
        asked = await client.wait_for(lambda m: m.get("method") == "session/request_permission")
        await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "_maybe"}}})
        assert await client.idle() == ("idle", "end_turn")  # nobody decided: the run waits in the store
        assert not (harness.workspace / "x").exists()


async def test_resume_replays_from_a_message_id(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.configure([{"text": "One."}, {"text": "Two."}])
    cwd = str(harness.workspace)
    async with spawn_v2(harness.command(), harness.workspace) as client:
        sid = await client.new_session(harness.workspace)
        await client.prompt(sid, "first")
        await client.idle()
        second = await client.prompt(sid, "second")
        await client.idle()
    async with spawn_v2(harness.command(), harness.workspace) as client:
        cursor = {"type": "_message", "messageId": second}
        answer = await client.request("session/resume", {"sessionId": sid, "cwd": cwd, "replayFrom": cursor})
        replayed = [m["params"]["update"] for m in client.incoming[: client.incoming.index(answer)]
                    if m.get("method") == "session/update"]  # fmt: skip
        texts = [u["content"]["text"] for u in replayed if u["sessionUpdate"].endswith("_chunk")]
        assert texts == ["second", "Two."]
        assert replayed[0]["messageId"] == second and replayed[-1] == {"sessionUpdate": "state_update", "state": "idle"}
        missing = {"type": "_message", "messageId": "msg_nope"}
        bad = await client.request("session/resume", {"sessionId": sid, "cwd": cwd, "replayFrom": missing})
        assert bad["error"]["code"] == -32602
        start = len(client.incoming)
        future = await client.request("session/resume", {"sessionId": sid, "cwd": cwd, "replayFrom": {"type": "_x"}})
        assert "result" in future  # an unknown cursor is tolerated: everything is replayed
        texts = [m["params"]["update"].get("content", {}).get("text") for m in client.incoming[start:]
                 if m.get("method") == "session/update"]  # fmt: skip
        assert "first" in texts and "second" in texts
        plain = await client.request("session/resume", {"sessionId": sid, "cwd": cwd})
        assert "modes" not in plain["result"] and plain["result"]["configOptions"]


async def test_session_methods_in_their_v2_shapes(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.configure([{"text": "hi"}], models='[models.other]\nprovider = "scripted"\nscript = "script.json"')
    cwd = str(harness.workspace)
    async with spawn_v2(harness.command(), harness.workspace) as client:
        created = (await client.request("session/new", {"cwd": cwd, "mcpServers": [], "_meta": None}))["result"]
        sid = created["sessionId"]
        assert "modes" not in created
        assert {o["configId"] for o in created["configOptions"]} == {"mode", "model"}
        params = {"sessionId": sid, "configId": "model", "type": "id", "value": "other"}
        changed = (await client.request("session/set_config_option", params))["result"]
        assert {o["configId"]: o["currentValue"] for o in changed["configOptions"]}["model"] == "other"
        assert (await client.request("session/new", {"cwd": "relative"}))["error"]["code"] == -32602
        listed = (await client.request("session/list", {"cwd": cwd}))["result"]["sessions"]
        assert [s["sessionId"] for s in listed] == [sid]
        assert (await client.request("session/close", {"sessionId": sid}))["result"] == {}
        unopened = await client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]})
        assert unopened["error"]["code"] == -32002
        assert (await client.request("session/delete", {"sessionId": sid}))["result"] == {}
        assert (await client.request("session/list", {"cwd": cwd}))["result"]["sessions"] == []


async def test_without_a_model_auth_login_adopts_one_set_since(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.config = harness.dir / "config.toml"
    harness.config.write_text("")
    async with spawn_v2(harness.command(), harness.workspace, initialize=False) as client:
        info = {"name": "v2-test", "version": "0.1"}
        result = (await client.request("initialize", {"protocolVersion": 2, "info": info}))["result"]
        [method] = result["authMethods"]
        assert method["type"] == "agent"
        assert (await client.request("session/new", {"cwd": str(harness.workspace)}))["error"]["code"] == -32000
        assert (await client.request("auth/login", {"methodId": method["methodId"]}))["error"]["code"] == -32000
        harness.configure([{"text": "configured now"}])
        assert (await client.request("auth/login", {"methodId": method["methodId"]}))["result"] == {}
        sid = await client.new_session(harness.workspace)
        await client.prompt(sid, "hi")
        assert await client.idle() == ("idle", "end_turn")
        assert (await client.request("auth/logout", {}))["result"] == {}

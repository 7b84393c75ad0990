"""The Tasks extension (``io.modelcontextprotocol/tasks``) on the raw 2026-07-28 wire: an agent run that waits for a
person is an ``input_required`` task that outlives the process (kill -9 and start again), answered once through
``tasks/update`` (the tool's effect happens exactly once) or cancelled durably through ``tasks/cancel``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.test_mcp_server_wire import Raw, spawn
from tests.protocols.mcp.support import make_env, turn

pytestmark = [pytest.mark.anyio]
TASKS = "io.modelcontextprotocol/tasks"
CAPABILITIES = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}


def meta(capabilities: dict[str, Any] = CAPABILITIES) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


async def request(raw: Raw, id: int, method: str, params: dict[str, Any], capabilities: Any = CAPABILITIES) -> Any:
    return await raw.request(id, method, {**params, "_meta": meta(capabilities)})


async def kill(raw: Raw) -> None:
    raw.process.kill()
    await raw.process.wait()


async def waiting_task(raw: Raw) -> dict[str, Any]:
    """Start the helper, whose run waits for approval of ``mark``: the task it becomes."""
    answer = await request(raw, 1, "tools/call", {"name": "agent_helper", "arguments": {"message": "mark it"}})
    return answer["result"]


async def until_done(raw: Raw, task_id: str, first_id: int) -> dict[str, Any]:
    with anyio.fail_after(15):
        for id in range(first_id, first_id + 1000):
            task = (await request(raw, id, "tasks/get", {"taskId": task_id}))["result"]
            if task["status"] not in ("working", "input_required"):
                return task
            await anyio.sleep(0.1)
    raise AssertionError("the task did not end")


def marking(tmp_path: Path) -> Any:
    return make_env(tmp_path, [turn("Marking.", {"name": "mark", "arguments": {"label": "one"}}), turn("Done.")])


async def test_a_waiting_run_is_a_task_across_kill_9_answered_once(tmp_path: Path) -> None:
    env = marking(tmp_path)
    raw = await spawn(env)
    discovered = (await raw.request(0, "server/discover", {"_meta": meta()}))["result"]
    assert discovered["capabilities"]["extensions"] == {TASKS: {}}
    created = await waiting_task(raw)
    assert created["resultType"] == "task" and created["status"] == "input_required", created
    assert created["ttlMs"] is None and created["createdAt"].endswith("Z")
    [(key, question)] = created["inputRequests"].items()
    assert question["method"] == "elicitation/create" and "mark" in question["params"]["message"]
    assert question["params"]["requestedSchema"]["properties"]["decision"]["enum"][0] == "allow_once"
    await kill(raw)
    assert env.marks == []

    raw = await spawn(env)  # a new process: the task is the run, in the store
    task_id = created["taskId"]
    polled = (await request(raw, 2, "tasks/get", {"taskId": task_id}))["result"]
    assert polled["resultType"] == "complete" and polled["status"] == "input_required"
    assert polled["inputRequests"] == created["inputRequests"]
    allow = {key: {"action": "accept", "content": {"decision": "allow_once"}}}
    acked = (await request(raw, 3, "tasks/update", {"taskId": task_id, "inputResponses": allow}))["result"]
    assert acked == {"resultType": "complete", "_meta": acked["_meta"]}
    after = (await request(raw, 1000, "tasks/get", {"taskId": task_id}))["result"]
    assert key not in after.get("inputRequests", {})  # answered: not asked again while the run takes the answer
    done = await until_done(raw, task_id, 4)
    assert done["status"] == "completed" and done["result"]["isError"] is False
    assert done["result"]["structuredContent"]["status"] == "completed"
    assert done["result"]["structuredContent"]["response"] == "Done."
    again = (await request(raw, 2000, "tasks/update", {"taskId": task_id, "inputResponses": allow}))["result"]
    assert "error" not in again  # an answer to a key no longer outstanding is ignored
    await kill(raw)
    assert env.marks == ["one"]


async def test_tasks_cancel_cancels_a_waiting_run_durably(tmp_path: Path) -> None:
    env = marking(tmp_path)
    raw = await spawn(env)
    task_id = (await waiting_task(raw))["taskId"]
    acked = await request(raw, 2, "tasks/cancel", {"taskId": task_id})
    assert acked["result"]["resultType"] == "complete"
    assert (await request(raw, 3, "tasks/get", {"taskId": task_id}))["result"]["status"] == "cancelled"
    await kill(raw)
    raw = await spawn(env)
    after = (await request(raw, 4, "tasks/get", {"taskId": task_id}))["result"]
    assert after["status"] == "cancelled" and "inputRequests" not in after
    allow = {"call@0": {"action": "accept", "content": {"decision": "allow_once"}}}
    assert "error" not in await request(raw, 5, "tasks/update", {"taskId": task_id, "inputResponses": allow})
    await kill(raw)
    assert env.marks == []


async def test_tasks_need_the_extension_and_a_known_task(tmp_path: Path) -> None:
    env = marking(tmp_path)
    raw = await spawn(env)
    plain = await request(raw, 1, "tools/call", {"name": "agent_helper", "arguments": {"message": "m"}},
                          {"elicitation": {"form": {}}})  # fmt: skip
    assert plain["result"]["resultType"] == "input_required"  # no Tasks declared: the MRTR round, as before
    unknown = await request(raw, 2, "tasks/get", {"taskId": "nope"})
    assert unknown["error"]["code"] == -32602
    missing = await request(raw, 3, "tasks/get", {"taskId": "nope"}, {})
    assert missing["error"]["code"] == -32021
    assert missing["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    no_form = await request(raw, 4, "tools/call", {"name": "agent_helper", "arguments": {"message": "m"}},
                            {"extensions": {TASKS: {}}})  # fmt: skip
    assert no_form["result"]["structuredContent"]["status"] == "waiting"  # nobody to ask: resume_run, as before
    await kill(raw)


async def test_a_listen_stream_reports_the_task_until_it_completes(tmp_path: Path) -> None:
    env = marking(tmp_path)
    raw = await spawn(env)
    created = await waiting_task(raw)
    task_id = created["taskId"]
    refused = await request(raw, 2, "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, {})
    assert refused["error"]["code"] == -32021
    await raw.send({"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen",
                    "params": {"notifications": {"taskIds": [task_id, "nope"]}, "_meta": meta()}})  # fmt: skip
    acknowledged = await raw.receive()
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"] == {"taskIds": [task_id]}
    [key] = created["inputRequests"]
    allow = {key: {"action": "accept", "content": {"decision": "allow_once"}}}
    await raw.send({"jsonrpc": "2.0", "id": 4, "method": "tasks/update",
                    "params": {"taskId": task_id, "inputResponses": allow, "_meta": meta()}})  # fmt: skip
    statuses: list[str] = []
    with anyio.fail_after(15):
        while "completed" not in statuses:
            message = await raw.receive()
            if message.get("method") == "notifications/tasks":
                assert message["params"]["taskId"] == task_id and message["params"]["_meta"]
                statuses.append(message["params"]["status"])
    assert message["params"]["result"]["structuredContent"]["response"] == "Done."
    await kill(raw)
    assert env.marks == ["one"]


HOST_AGENT = """
[models.host]
provider = "mcp_sampling"

[agents.marker]
model = "host"
tools = ["mark"]
expose_mcp = true
"""
SAMPLING = {**CAPABILITIES, "sampling": {"tools": {}}}


def sampled(*content: dict[str, Any], stop: str) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content), "model": "host-1", "stopReason": stop}


async def until_status(raw: Raw, task_id: str, status: str, first_id: int) -> dict[str, Any]:
    with anyio.fail_after(15):
        for id in range(first_id, first_id + 1000):
            task = (await request(raw, id, "tasks/get", {"taskId": task_id}, SAMPLING))["result"]
            if task["status"] == status:
                return task
            await anyio.sleep(0.1)
    raise AssertionError(f"the task never became {status}")


async def test_a_task_on_the_clients_model_asks_each_turn_through_the_task(tmp_path: Path) -> None:
    env = make_env(tmp_path, extra=HOST_AGENT)
    raw = await spawn(env)
    arguments = {"name": "agent_marker", "arguments": {"message": "Mark t."}}
    first = (await request(raw, 1, "tools/call", arguments, SAMPLING))["result"]
    assert first["resultType"] == "input_required"  # before the task: a round of the call itself
    [key] = first["inputRequests"]
    use = {"type": "tool_use", "id": "use-1", "name": "mark", "input": {"label": "t"}}
    retry = {**arguments, "inputResponses": {key: sampled(use, stop="toolUse")}, "requestState": first["requestState"]}
    created = (await request(raw, 2, "tools/call", retry, SAMPLING))["result"]
    assert created["resultType"] == "task" and created["status"] == "input_required", created
    [approval] = created["inputRequests"]
    await kill(raw)

    raw = await spawn(env)
    task_id = created["taskId"]
    allow = {approval: {"action": "accept", "content": {"decision": "allow_once"}}}
    await request(raw, 3, "tasks/update", {"taskId": task_id, "inputResponses": allow}, SAMPLING)
    asking = await until_status(raw, task_id, "input_required", 4)
    [(model_key, turn)] = asking["inputRequests"].items()
    assert model_key.startswith("model-") and turn["method"] == "sampling/createMessage"
    assert turn["params"]["messages"][-1]["content"][0]["content"][0]["text"] == "marked t"
    assert env.marks == ["t"]
    await kill(raw)

    raw = await spawn(env)  # the model's request is kept beside the waiting run: a new process shows it
    again = (await request(raw, 2000, "tasks/get", {"taskId": task_id}, SAMPLING))["result"]
    assert again["inputRequests"] == asking["inputRequests"]
    answer = {model_key: sampled({"type": "text", "text": "Marked t."}, stop="endTurn")}
    await request(raw, 2001, "tasks/update", {"taskId": task_id, "inputResponses": answer}, SAMPLING)
    done = await until_status(raw, task_id, "completed", 2002)
    assert done["result"]["structuredContent"]["response"] == "Marked t."
    await kill(raw)
    assert env.marks == ["t"]

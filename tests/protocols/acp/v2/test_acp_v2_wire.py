"""ACP v2 negotiation and transport over the real process: v2 only when asked for, v1 unchanged otherwise; the v2
method surface; JSON-RPC batches in v2 only; ``_meta`` null and ``_`` extensions tolerated."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.protocols.acp.conftest import Harness
from tests.protocols.acp.v2.support import spawn_v2

pytestmark = pytest.mark.anyio


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    h = Harness(tmp_path)
    h.configure([{"text": "Hello."}])
    return h


async def test_v2_initialize_has_info_and_capability_objects(harness: Harness) -> None:
    async with spawn_v2(harness.command(), harness.workspace, initialize=False) as client:
        info = {"name": "v2-test", "version": "0.1"}
        params = {"protocolVersion": 2, "capabilities": {"_meta": None}, "info": info, "_meta": None}
        result = (await client.request("initialize", params))["result"]
        assert result["protocolVersion"] == 2
        assert result["info"]["name"] == "awaken-stdio"
        session = result["capabilities"]["session"]
        assert session["mcp"] == {"stdio": {}, "http": {}}
        assert session["delete"] == {} and session["additionalDirectories"] == {}
        assert "embeddedContext" in session["prompt"]
        assert result["authMethods"] == []
        assert "agentCapabilities" not in result  # no v1 shape in a v2 answer


@pytest.mark.parametrize("version", [1, 3, 65535])
async def test_other_versions_get_v1_unchanged(harness: Harness, version: int) -> None:
    async with spawn_v2(harness.command(), harness.workspace, initialize=False) as client:
        answer = await client.request("initialize", {"protocolVersion": version, "clientCapabilities": {}})
        assert answer["result"]["protocolVersion"] == 1
        assert "agentCapabilities" in answer["result"]
        assert (await client.request("auth/login", {"methodId": "x"}))["error"]["code"] == -32601
        await client.send([{"jsonrpc": "2.0", "id": 99, "method": "session/list", "params": {}}])
        refused = await client.wait_for(lambda m: m.get("error", {}).get("code") == -32600)
        assert refused["error"]["message"] == "Invalid Request: batches are not supported"
        client.errors.clear()  # v1 messages are not v2's: this client's schema is not theirs


async def test_v2_removes_v1_only_methods(harness: Harness) -> None:
    async with spawn_v2(harness.command(), harness.workspace) as client:
        sid = (await client.request("session/new", {"cwd": str(harness.workspace)}))["result"]["sessionId"]
        for method in ("session/load", "session/set_mode", "authenticate"):
            answer = await client.request(method, {"sessionId": sid, "cwd": str(harness.workspace), "modeId": "plan"})
            assert answer["error"]["code"] == -32601, method
        assert (await client.request("_awaken/nothing", {}))["error"]["code"] == -32601
        await client.send({"jsonrpc": "2.0", "method": "_awaken/note", "params": {"_meta": None}})  # ignored
        assert (await client.request("auth/logout", {}))["result"] == {}


async def test_v2_serves_batches(harness: Harness) -> None:
    async with spawn_v2(harness.command(), harness.workspace) as client:
        cwd = str(harness.workspace)
        await client.send(
            [
                {"jsonrpc": "2.0", "id": "a", "method": "session/list", "params": {"cwd": cwd}},
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess_none"}},
                {"jsonrpc": "1.0", "id": "b", "method": "session/list"},
                7,
                {"jsonrpc": "2.0", "id": "c", "method": "session/nothing", "params": {}},
            ]
        )
        listed = await client.wait_for(lambda m: m.get("id") == "a")
        assert listed["result"] == {"sessions": []}
        answers = [m for m in client.incoming if "method" not in m and m.get("id") != 1]  # not initialize's
        assert {str(m.get("id")): m.get("error", {}).get("code") for m in answers} == {
            "a": None,
            "b": -32600,
            "None": -32600,
            "c": -32601,
        }
        assert client.batches == 1  # one array answered the whole batch
        await client.send([])
        empty = await client.wait_for(lambda m: m.get("error", {}).get("message") == "Invalid Request: an empty batch")
        assert empty["id"] is None


async def test_a_malformed_v2_initialize_is_invalid_params_and_the_agent_keeps_serving(harness: Harness) -> None:
    async with spawn_v2(harness.command(), harness.workspace, initialize=False) as client:
        bad = await client.request("initialize", {"protocolVersion": 2, "info": {"name": 7}})
        assert bad["error"]["code"] == -32602 and "info" in bad["error"]["message"]
        bad = await client.request("initialize", {"protocolVersion": 2, "info": {}, "capabilities": []})
        assert bad["error"]["code"] == -32602
        assert (await client.initialize())["result"]["protocolVersion"] == 2

"""ACP at ``/acp`` over real sockets with the ACP Python SDK's own HTTP and WebSocket clients, every message the
agent sent validated against the ACP schema: a session made over a WebSocket continues over HTTP after the socket is
gone; the door refuses an upgrade without the token; HTTP's routing errors."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import websockets
from acp.ws import create_websocket_stream

from tests.protocols.mcp.support import make_env
from tests.serve.acp_support import AUTH, acp_env, remote
from tests.serve.support import serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_a_websocket_session_continues_over_http(tmp_path: Path) -> None:
    env = acp_env(tmp_path, [{"text": "First answer."}, {"text": "Second answer."}])
    async with serve(env) as served:
        async with remote(served, "ws", env.cwd) as ws:
            session_id = await ws.new_session()
            assert await ws.prompt(session_id, "one") == "end_turn"
            assert ws.texts("agent_message_chunk", session_id) == ["First answer."]
        async with remote(served, "http", env.cwd) as http:
            await http.conn.load_session(session_id=session_id, cwd=str(env.cwd), mcp_servers=[])
            assert http.texts("user_message_chunk", session_id) == ["one"]  # the history, once
            assert http.texts("agent_message_chunk", session_id) == ["First answer."]
            assert await http.prompt(session_id, "two") == "end_turn"
            assert http.texts("agent_message_chunk", session_id) == ["First answer.", "Second answer."]
            answers = [m for d, m in http.wire.messages if d == "incoming" and "result" in m]
            assert len(answers) == len({m["id"] for m in answers})  # every answer came once


async def test_the_door_refuses_an_upgrade_without_the_token(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    async with serve(env) as served:
        url = served.url.replace("http", "ws", 1) + "/acp"
        with pytest.raises(websockets.InvalidStatus) as refused:
            await create_websocket_stream(url)
        assert refused.value.response.status_code == 401
        with pytest.raises(websockets.InvalidStatus) as foreign:
            await create_websocket_stream(url, headers={**AUTH, "Origin": "http://evil.example.com"})
        assert foreign.value.response.status_code == 403


async def test_http_routing_errors(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    async with serve(env) as served, httpx.AsyncClient(headers=AUTH) as http:
        url = f"{served.url}/acp"
        plain = {"content-type": "application/json"}
        assert (await http.post(url, content="[]", headers=plain)).status_code == 501
        assert (
            await http.post(url, content=json.dumps(init), headers={"content-type": "text/plain"})
        ).status_code == 415
        ping = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
        assert (await http.post(url, json=ping)).status_code == 400  # no connection yet
        assert (await http.post(url, json=ping, headers={"acp-connection-id": "nope"})).status_code == 404
        opened = await http.post(url, json=init)
        assert opened.status_code == 200 and opened.json()["result"]["protocolVersion"] == 1
        sessions = opened.json()["result"]["agentCapabilities"]["sessionCapabilities"]
        assert sessions["attach"] == {"roles": ["controller", "observer"]}  # several clients per session
        connection = {"acp-connection-id": opened.headers["acp-connection-id"]}
        prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
        assert (await http.post(url, json=prompt, headers=connection)).status_code == 400  # no Acp-Session-Id
        unknown = {**connection, "acp-session-id": "s"}
        assert (await http.post(url, json=prompt, headers=unknown)).status_code == 404
        assert (await http.get(url, headers=connection)).status_code == 406
        assert (await http.delete(url, headers=connection)).status_code == 202
        assert (await http.post(url, json=ping, headers=connection)).status_code == 404

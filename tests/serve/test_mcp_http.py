"""``awaken-stdio serve`` MCP at ``/mcp`` over real sockets: the ``mcp`` SDK's Streamable HTTP client in both eras,
the door (token, Host, Origin, size) refusing before anything happens, and a waiting run approved from the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.protocols.mcp.support import Env, make_env, turn
from tests.serve.support import INITIALIZE, JSON_HEADERS, TOKEN, Served, serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
MODES = ["legacy", "auto"]
MARK = {"name": "mark", "arguments": {"label": "one"}}
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
MARK_X: dict[str, Any] = {"name": "mark", "arguments": {"label": "x"}, "_meta": ENVELOPE}
MODERN_CALL: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": MARK_X}
MODERN_HEADERS = {**JSON_HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "mark"}


@asynccontextmanager
async def client(served: Served, mode: str, **kwargs: Any) -> AsyncGenerator[Client]:
    """The SDK's client on its Streamable HTTP transport, with the token (the SDK leaves the HTTP client open)."""
    async with served.client() as http:
        transport = streamable_http_client(served.mcp, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=30, **kwargs) as mcp:  # type: ignore[arg-type]
            yield mcp


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_client_lists_and_calls(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path)
    async with serve(env) as served, client(served, mode) as mcp:
        assert mcp.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        names = {t.name for t in (await mcp.list_tools()).tools}
        assert {"agent_helper", "resume_run", "add", "mark", "read_file"} <= names
        assert (await mcp.call_tool("add", {"a": 1, "b": 2})).structured_content == {"sum": 3}
        answer = await mcp.call_tool("agent_helper", {"message": "hi"})
        assert answer.structured_content["status"] == "completed"
        assert answer.structured_content["response"] == "Hello from the helper."
        assert (await mcp.call_tool("mark", {"label": "direct"})).is_error is False
    assert env.marks == ["direct"]


async def test_two_sessions_at_once(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    async with serve(env) as served, client(served, "legacy") as one, client(served, "legacy") as two:
        results = {}

        async def add(name: str, c: Client, a: int) -> None:
            results[name] = (await c.call_tool("add", {"a": a, "b": 1})).structured_content

        async with anyio.create_task_group() as tg:
            tg.start_soon(add, "one", one, 1)
            tg.start_soon(add, "two", two, 10)
    assert results == {"one": {"sum": 2}, "two": {"sum": 11}}


async def test_the_door_refuses_before_anything_happens(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    body = json.dumps(MODERN_CALL)
    async with serve(env) as served:
        async with served.client(token=None) as anonymous:
            response = await anonymous.post(served.mcp, content=body, headers=MODERN_HEADERS)
            assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
        async with served.client(token="wrong-token-0123456789") as wrong:
            assert (await wrong.post(served.mcp, content=body, headers=MODERN_HEADERS)).status_code == 401
        async with served.client() as good:
            for foreign in ({"host": "evil.example.com"}, {"origin": "http://evil.example.com"}, {"origin": "null"}):
                response = await good.post(served.mcp, content=body, headers={**MODERN_HEADERS, **foreign})
                assert response.status_code == 403, foreign
            huge = json.dumps(
                {**MODERN_CALL, "params": {**MODERN_CALL["params"], "arguments": {"label": "x" * 9_000_000}}}
            )
            assert (await good.post(served.mcp, content=huge, headers=MODERN_HEADERS)).status_code == 413

            async def chunks() -> AsyncGenerator[bytes]:  # no Content-Length: counted as it streams in
                for _ in range(10):
                    yield b"x" * 1_000_000

            assert (await good.post(served.mcp, content=chunks(), headers=MODERN_HEADERS)).status_code == 413
            assert env.marks == []  # none of the refused calls ran
            local = await good.post(served.mcp, content=body, headers={**MODERN_HEADERS, "origin": served.url})
            assert local.status_code == 200 and local.json()["result"]["isError"] is False
    assert env.marks == ["x"]
    assert not any(TOKEN in line for line in served.stderr)


async def test_protocol_errors_over_http(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    async with serve(env) as served, served.client() as http:
        url = served.mcp
        assert (await http.post(url, content="{nope", headers=JSON_HEADERS)).json()["error"]["code"] == -32700
        assert (await http.post(url, content="[]", headers=JSON_HEADERS)).status_code == 400
        no_session = await http.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=JSON_HEADERS
        )
        assert no_session.status_code == 400
        gone = await http.post(url, json=INITIALIZE, headers={**JSON_HEADERS, "mcp-session-id": "nope"})
        assert gone.status_code == 404
        mismatch = await http.post(url, json=MODERN_CALL, headers={**MODERN_HEADERS, "mcp-name": "other"})
        assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
        unknown = {**MODERN_CALL, "method": "nope/nope"}
        missing = await http.post(url, json=unknown, headers={**MODERN_HEADERS, "mcp-method": "nope/nope"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == -32601
        opened = await http.post(url, json=INITIALIZE, headers=JSON_HEADERS)
        session = opened.headers["mcp-session-id"]
        assert (await http.delete(url, headers={"mcp-session-id": session})).status_code == 204
        after = await http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
                                headers={**JSON_HEADERS, "mcp-session-id": session})  # fmt: skip
        assert after.status_code == 404
        assert (await http.get(url, headers={"accept": "text/event-stream"})).status_code == 405
    assert env.marks == []


def cli(env: Env, *args: str) -> str:
    command = [sys.executable, "-m", "awaken_stdio", *args, "--config", str(env.config), "--store", env.store]
    done = subprocess.run(command, env=env.environ(), capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


@pytest.mark.parametrize("mode", MODES)
async def test_waiting_run_approved_from_the_cli(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path, [turn("Marking.", MARK), turn("Done.")])
    async with serve(env) as served:
        async with client(served, mode) as mcp:  # no elicitation: the run waits
            waiting = (await mcp.call_tool("agent_helper", {"message": "mark it"})).structured_content
        assert waiting["status"] == "waiting" and env.marks == []
        await anyio.to_thread.run_sync(cli, env, "runs", "approve", waiting["run_id"])
        with anyio.fail_after(30):
            while json.loads(cli(env, "runs", "show", waiting["run_id"], "--json"))["status"] != "completed":
                await anyio.sleep(0.1)
    assert env.marks == ["one"]

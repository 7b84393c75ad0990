"""``awaken-stdio connect``: an editor that launches agents over stdio uses a ``serve`` elsewhere. The official ACP
SDK client drives the real bridge process over real pipes (every message validated against the ACP schema, so stdout
carries nothing else); the bridge talks to the real server over a WebSocket. A permission asked by the server reaches
the editor and its answer goes back (one effect); a second editor continues the session; a refused token, a missing
one, a bad address and a line that is not JSON each get a precise answer."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process, text_block
from acp.schema import ClientCapabilities, Implementation

from tests.protocols.acp.conftest import TestClient as SdkClient
from tests.protocols.acp.conftest import WireLog
from tests.protocols.mcp.support import Env, turn
from tests.serve.acp_support import acp_env
from tests.serve.support import TOKEN, Served, serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
MARK = {"name": "mark", "arguments": {"label": "one"}}


def bridge(served: Served) -> list[str]:
    return [sys.executable, "-m", "awaken_stdio", "connect", served.url.replace("http", "ws", 1) + "/acp"]


def environ(env: Env, tmp_path: Path, token: str | None = TOKEN) -> dict[str, str]:
    """The test's environment with ``token`` (or none), and a home of its own: no token file of the user's."""
    variables = {**env.environ(), "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "home" / "data")}
    variables.pop("AWAKEN_STDIO_TOKEN", None)
    if token is not None:
        variables["AWAKEN_STDIO_TOKEN"] = token
    return variables


@asynccontextmanager
async def editor(served: Served, env: Env, tmp_path: Path, client: SdkClient) -> AsyncIterator[tuple[Any, WireLog]]:
    """The SDK client over the pipes of one ``connect`` process, initialized."""
    wire = WireLog()
    command = bridge(served)
    async with spawn_agent_process(
        client,
        *command,
        env=environ(env, tmp_path),
        transport_kwargs={"stderr": None},
        observers=[wire.observe],
    ) as (conn, _process):
        with anyio.fail_after(20):
            await conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="zed-like", version="0.1"),
            )
        yield conn, wire
    assert not wire.errors, "\n".join(wire.errors)


async def test_an_editor_over_connect_is_asked_and_its_answer_runs_the_call_once(tmp_path: Path) -> None:
    env = acp_env(tmp_path, [turn("Marking.", MARK), turn("Done.")])
    first = SdkClient(env.cwd)
    async with serve(env) as served:
        async with editor(served, env, tmp_path, first) as (conn, wire):
            with anyio.fail_after(30):
                session_id = (await conn.new_session(cwd=str(env.cwd), mcp_servers=[])).session_id
                stop = (await conn.prompt(session_id=session_id, prompt=[text_block("mark it")])).stop_reason
        assert stop == "end_turn" and env.marks == ["one"]
        assert len(first.permissions) == 1  # asked through the bridge, answered back through it
        assert any(m.get("method") == "session/request_permission" for m in wire.incoming())

        second = SdkClient(env.cwd)  # another editor window, later: the session lives in the server
        async with editor(served, env, tmp_path, second) as (conn, wire):
            with anyio.fail_after(30):
                await conn.load_session(session_id=session_id, cwd=str(env.cwd), mcp_servers=[])
        replayed = [
            u["content"]["text"] for u in wire.updates(session_id) if u["sessionUpdate"] == "user_message_chunk"
        ]
        assert replayed == ["mark it"]
    assert env.marks == ["one"]


async def run_bridge(command: list[str], variables: dict[str, str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):
        return await anyio.run_process(command, input=stdin, env=variables, check=False)


async def test_a_refused_token_a_missing_one_and_a_bad_address_are_said_on_stderr(tmp_path: Path) -> None:
    env = acp_env(tmp_path, [turn("Hello.")])
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}).encode()
    async with serve(env) as served:
        wrong = await run_bridge(bridge(served), environ(env, tmp_path, "not-the-token-0123456789"), hello + b"\n")
        assert wrong.returncode == 1 and wrong.stdout == b""
        assert b"answered 401: the token was refused" in wrong.stderr, wrong.stderr

        missing = await run_bridge(bridge(served), environ(env, tmp_path, None), hello + b"\n")
        assert missing.returncode == 2 and missing.stdout == b""
        assert b"no token: set AWAKEN_STDIO_TOKEN" in missing.stderr, missing.stderr

    command = [*bridge(served)[:-1], "ftp://example.com/acp"]
    bad = await run_bridge(command, environ(env, tmp_path), b"")
    assert bad.returncode == 2 and bad.stdout == b"" and b"is not an ws://" in bad.stderr, bad.stderr
    gone = await run_bridge(bridge(served), environ(env, tmp_path), hello + b"\n")  # the server has stopped
    assert gone.returncode == 1 and gone.stdout == b"" and b"cannot reach" in gone.stderr, gone.stderr


async def test_a_line_that_is_not_json_is_answered_and_the_bridge_goes_on(tmp_path: Path) -> None:
    env = acp_env(tmp_path, [turn("Hello.")])
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
    async with serve(env) as served:
        done = await run_bridge(bridge(served), environ(env, tmp_path), b"{not json\n" + json.dumps(hello).encode())
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["id"] is None and first["error"]["code"] == -32700
    assert second["id"] == 1 and second["result"]["protocolVersion"] == 1

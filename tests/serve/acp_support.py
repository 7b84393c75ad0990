"""ACP clients of ``awaken-stdio serve``: the ACP Python SDK's Streamable HTTP and WebSocket transports, with the
token, the client and the schema-validating wire log of the stdio ACP tests."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
from acp import connect_to_agent, text_block
from acp.http import create_http_stream
from acp.schema import ClientCapabilities, Implementation
from acp.ws import create_websocket_stream

from tests.protocols.acp.conftest import TestClient, WireLog, write_config
from tests.protocols.mcp.support import Env
from tests.serve.support import TOKEN, Served

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def acp_env(tmp_path: Path, turns: list[dict[str, Any]]) -> Env:
    """The stdio ACP tests' config (scripted agent ``coder``, the default) as an ``Env`` ``serve`` can run, with
    the MCP tests' tools (``mark``: a side effect that asks)."""
    (tmp_path / "cfg").mkdir()
    (tmp_path / "work").mkdir()
    config = write_config(tmp_path / "cfg", turns, models='[tools]\nmodules = ["mcp_test_tools"]\n')
    return Env(tmp_path, config, f"sqlite:///{tmp_path / 'awaken.db'}", (tmp_path / "work").resolve())


class Remote:
    """One ACP client connection to the server, over ``kind`` (``http`` or ``ws``)."""

    def __init__(self, conn: Any, client: TestClient, wire: WireLog, workspace: Path) -> None:
        self.conn = conn
        self.client = client
        self.wire = wire
        self.workspace = workspace

    async def new_session(self) -> str:
        with anyio.fail_after(20):
            return (await self.conn.new_session(cwd=str(self.workspace), mcp_servers=[])).session_id

    async def prompt(self, session_id: str, text: str) -> str:
        with anyio.fail_after(30):
            return (await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])).stop_reason

    async def raw(self, method: str, params: dict[str, Any]) -> Any:
        """A request the SDK has no method for (``session/attach``)."""
        with anyio.fail_after(20):
            return await self.conn._conn.send_request(method, params)

    def texts(self, kind: str, session_id: str | None = None) -> list[str]:
        """The text of every ``kind`` update (e.g. ``agent_message_chunk``), joined per message."""
        return [u["content"]["text"] for u in self.wire.updates(session_id) if u["sessionUpdate"] == kind]


@asynccontextmanager
async def remote(served: Served, kind: str, workspace: Path, client: TestClient | None = None,
                 name: str = "acp-remote-test") -> AsyncGenerator[Remote]:  # fmt: skip
    """An initialized SDK client connection over ``kind``; closed (a disconnect) when the block ends."""
    client = client or TestClient(workspace)
    wire = WireLog()
    async with httpx.AsyncClient(headers=AUTH, timeout=httpx.Timeout(None)) as http:
        if kind == "ws":
            transport = await create_websocket_stream(served.url.replace("http", "ws", 1) + "/acp", headers=AUTH)
        else:
            transport = create_http_stream(f"{served.url}/acp", client=http)
        conn = connect_to_agent(cast(Any, client), transport, observers=[wire.observe])  # the stdio tests' client
        try:
            with anyio.fail_after(20):
                await conn.initialize(
                    protocol_version=1,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name=name, version="0.1"),
                )
            yield Remote(conn, client, wire, workspace)
        finally:
            await conn.close()
    assert not wire.errors, "\n".join(wire.errors)

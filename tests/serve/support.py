"""``awaken-stdio serve`` spawned for real on a free loopback port, and the clients the tests talk to it with."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from anyio.abc import Process

from tests.protocols.mcp.support import Env

TOKEN = "test-token-0123456789abcdef"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@dataclass
class Served:
    url: str  # the server's root, e.g. http://127.0.0.1:PORT
    process: Process
    stderr: list[str] = field(default_factory=list)

    @property
    def mcp(self) -> str:
        return f"{self.url}/mcp"

    def client(self, token: str | None = TOKEN, **kwargs: Any) -> httpx2.AsyncClient:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60), **kwargs)


@asynccontextmanager
async def serve(env: Env, *args: str, token: str | None = TOKEN, environ: dict[str, str] | None = None,
                ) -> AsyncGenerator[Served]:  # fmt: skip
    """The server on ``127.0.0.1:0`` for ``env``; stopped (SIGTERM) when the block ends."""
    command = [sys.executable, "-m", "awaken_stdio", "serve", "--config", str(env.config), "--store", env.store,
               "--cwd", str(env.cwd), "--listen", "127.0.0.1:0", *args]  # fmt: skip
    variables = {**env.environ(), **(environ or {})}
    variables.pop("AWAKEN_STDIO_TOKEN", None)
    if token is not None:
        variables["AWAKEN_STDIO_TOKEN"] = token
    process = await anyio.open_process(command, env=variables, stdin=subprocess.DEVNULL)
    served: Served | None = None
    lines: list[str] = []
    assert process.stderr is not None
    buffer = b""
    try:
        with anyio.fail_after(30):
            while served is None:
                chunk = await process.stderr.receive()
                buffer += chunk
                *done, buffer = buffer.split(b"\n")
                for line in done:
                    text = line.decode()
                    lines.append(text)
                    if " and MCP at " in text:
                        served = Served(text.split(" and MCP at ")[1].removesuffix("/mcp"), process, lines)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, process, lines, buffer)
            yield served
            tg.cancel_scope.cancel()
    except BaseException:
        print("\n".join(lines), file=sys.stderr)
        raise
    finally:
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
        await process.aclose()


async def _drain(process: Process, lines: list[str], buffer: bytes) -> None:
    assert process.stderr is not None
    async for chunk in process.stderr:
        buffer += chunk
        *done, buffer = buffer.split(b"\n")
        lines.extend(line.decode() for line in done)


def environ_without_token() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "AWAKEN_STDIO_TOKEN"}

"""JSON-RPC transport throughput: a server process on ``open_stdio`` + ``JsonRpcPeer``, read by this process.

Rows: notifications per second streamed to a pipe (an ACP ``session/update`` text chunk each; the ACP issue aims at
>= 10,000/s), sequential request round trips per second, and the module's import time.
Run alone with ``.venv/bin/python bench/bench_jsonrpc.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from typing import Any

import anyio
import anyio.abc

NOTIFICATIONS = 100_000
ROUND_TRIPS = 5_000
CHUNK = {
    "sessionId": "sess_01JABCDEFGHJKMNPQRSTVWXYZ0",
    "update": {
        "sessionUpdate": "agent_message_chunk",
        "messageId": "msg_01JABCDEFGHJKMNPQRSTVWXYZ0",
        "content": {"type": "text", "text": "The quick brown fox jumps over the lazy dog. "},
    },
}


async def _serve() -> None:
    from awaken_stdio.protocols.jsonrpc import JsonRpcPeer, Params, RequestContext
    from awaken_stdio.protocols.stdio import open_stdio

    peer = JsonRpcPeer()

    @peer.method("stream")
    async def stream(params: Params, ctx: RequestContext) -> int:
        assert isinstance(params, dict)
        for _ in range(params["count"]):
            await ctx.peer.notify("session/update", params["update"])
        return params["count"]

    @peer.method("echo")
    async def echo(params: Params, ctx: RequestContext) -> Params:
        return params

    async with open_stdio() as (reader, writer):
        await peer.run(reader, writer)


class _Lines:
    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def until_id(self, request_id: int) -> tuple[int, dict[str, Any]]:
        """Count lines up to the answer to ``request_id``; return the count and the answer."""
        needle = f'"id":{request_id},'.encode()
        count = 0
        while True:
            lines = self._buffer.split(b"\n")
            self._buffer = lines.pop()
            for line in lines:
                count += 1
                if needle in line:
                    return count, json.loads(line)
            self._buffer += await self._stream.receive(1 << 20)


async def run() -> list[dict[str, Any]]:
    process = await anyio.open_process([sys.executable, __file__, "--serve"], stderr=subprocess.DEVNULL)
    async with process:
        assert process.stdin is not None and process.stdout is not None
        lines = _Lines(process.stdout)

        async def call(request_id: int, method: str, params: Any) -> tuple[int, dict[str, Any]]:
            assert process.stdin is not None
            frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            await process.stdin.send(json.dumps(frame).encode() + b"\n")
            return await lines.until_id(request_id)

        await call(0, "echo", [])  # started and warm
        start = time.perf_counter()
        count, answer = await call(1, "stream", {"count": NOTIFICATIONS, "update": CHUNK})
        streamed = time.perf_counter() - start
        assert count == NOTIFICATIONS + 1 and answer["result"] == NOTIFICATIONS, (count, answer)

        start = time.perf_counter()
        for i in range(ROUND_TRIPS):
            await call(2 + i, "echo", {"i": i})
        round_trips = time.perf_counter() - start
        await process.stdin.aclose()
        await process.wait()

    importtime = (
        await anyio.run_process([sys.executable, "-X", "importtime", "-c", "import awaken_stdio.protocols.jsonrpc"])
    ).stderr.decode()
    match = re.search(r"\|\s*(\d+) \| awaken_stdio\.protocols\.jsonrpc$", importtime, re.MULTILINE)
    rows = [
        {
            "benchmark": "jsonrpc_notifications",
            "metric": "session/update notifications per second to a pipe",
            "value": round(NOTIFICATIONS / streamed),
            "unit": "msg/s",
        },
        {
            "benchmark": "jsonrpc_round_trips",
            "metric": "sequential request round trips per second over pipes",
            "value": round(ROUND_TRIPS / round_trips),
            "unit": "req/s",
        },
    ]
    if match:
        rows.append(
            {
                "benchmark": "jsonrpc_import",
                "metric": "import awaken_stdio.protocols.jsonrpc (cumulative, -X importtime)",
                "value": round(int(match.group(1)) / 1000, 1),
                "unit": "ms",
            }
        )
    return rows


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        anyio.run(_serve)
    else:
        for row in anyio.run(run):
            print(row)
